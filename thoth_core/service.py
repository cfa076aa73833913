"""Finding the resident service of a home (`thoth serve`) and talking to it with the standard library only.

The service advertises itself in `HOME/run/service.json` (mode 0600: it may hold the token) while it
runs: its URL, pid, token and start time. Clients (the `thoth` command's thin paths, the Claude Code
hook process) read that file, check the pid still runs and call the REST API over a plain socket; this
module must stay cheap to import (no runtime, pydantic, embedder or SDK), since the thin paths exist to
skip those imports. Why not `http.client`: importing it (with the `email` parser and `ssl` it pulls in)
took 60 ms of a hook process's 115 ms here; the service is ours and on this host, so HTTP/1.0 requests
(`Connection: close`: the body ends when the connection does, never chunked) are all a client needs.
Every failure to reach the service (a stale file, a refused or slow connection, a hung server) raises
`ServiceUnavailable` after a bounded wait, so callers fall back to working in-process.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager

from .errors import ThothError
from .processes import pid_alive

TYPE_CHECKING = False  # as typing.TYPE_CHECKING, without importing typing: the hook process's start-up counts
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

    Home = str | os.PathLike[str]

__all__ = [
    "CONNECT_TIMEOUT",
    "Response",
    "Service",
    "ServiceError",
    "ServiceUnavailable",
    "address",
    "advertised",
    "find_service",
    "service_file",
    "sse_events",
    "thin_commands",
]

THIN_GROUP = "thoth.thin"  # entry points: a command name -> "module:function", its thin client (see thoth_core.thin)
RUN_DIR = "run"
SERVICE_FILE = "service.json"
CONNECT_TIMEOUT = 0.5  # seconds to connect and get the response headers: a live service on this host answers in ms
READ_TIMEOUT = 30.0  # seconds between two reads of a response once it has started


class ServiceUnavailable(ThothError):
    """The service could not be reached in time; callers fall back to working in-process.

    `sent` is True when the request may have reached the service (it timed out waiting for the answer):
    a caller whose request writes (a turn) must not simply run it again in-process then.
    """

    def __init__(self, message: str, *, sent: bool = False) -> None:
        super().__init__(message)
        self.sent = sent


class ServiceError(ThothError):
    """The service answered with an error status; the message is its one line."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def service_file(home: Home) -> Path:
    """Where the service of this home advertises itself."""
    from pathlib import Path  # not at import: pathlib (with re and urllib.parse) costs a hook process 5-10 ms

    return Path(_service_path(home))


def _service_path(home: Home) -> str:
    return os.path.join(os.fspath(home), RUN_DIR, SERVICE_FILE)


@contextmanager
def advertised(home: Home, *, url: str, token: str | None) -> Iterator[None]:
    """Advertise a service at `url` for this home while the block runs; the file is removed at exit if still ours."""
    path = service_file(home)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"url": url, "pid": os.getpid(), "token": token, "started_at": time.time(), "thin": thin_commands()}
    partial = path.with_name(f".{SERVICE_FILE}.{os.getpid()}")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        json.dump(record, out)
    os.replace(partial, path)  # readers never see half a file
    try:
        yield
    finally:
        if _read(path) == record:  # another service may have taken the home over since
            path.unlink(missing_ok=True)


def thin_commands() -> dict[str, str]:
    """The installed plugins' thin clients by command name (entry point group `thoth.thin`), for the advertisement."""
    from importlib.metadata import entry_points

    return {entry.name: entry.value for entry in entry_points(group=THIN_GROUP)}


def _read(path: str | Path) -> dict[str, Any] | None:
    """The advertisement at path, or None when missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as advertisement:
            data = json.load(advertisement)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def find_service(home: Home) -> Service | None:
    """The service advertised for this home if its process still runs, else None (no network call)."""
    data = _read(_service_path(home))
    if data is None:
        return None
    url, pid, token, thin = data.get("url"), data.get("pid"), data.get("token"), data.get("thin", {})
    if not isinstance(url, str) or not isinstance(pid, int) or not (token is None or isinstance(token, str)):
        return None
    if pid <= 0 or not pid_alive(pid) or address(url) is None:
        return None
    if not isinstance(thin, dict) or not all(isinstance(v, str) for v in thin.values()):
        thin = {}
    return Service(url=url, token=token, thin=thin)


UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def quote(text: str, safe: str = "/") -> str:
    """Percent-encode text's UTF-8 bytes except unreserved ones and `safe` (as urllib.parse.quote)."""
    keep = UNRESERVED | frozenset(safe.encode("ascii"))
    return "".join(chr(b) if b in keep else f"%{b:02X}" for b in text.encode("utf-8"))


def urlencode(params: dict[str, Any]) -> str:
    """A query string of these parameters, as urllib.parse.urlencode writes it (a space as +)."""
    return "&".join(f"{plus(str(key))}={plus(str(value))}" for key, value in params.items())


def plus(text: str) -> str:
    """text for a query string: percent-encoded, a space as + (urllib.parse.quote_plus)."""
    return quote(text, safe=" ").replace(" ", "+")


def address(url: str) -> tuple[str, int, str] | None:
    """(host, port, path prefix) of an `http://HOST:PORT[/PATH]` URL (IPv6 in brackets), or None for any other."""
    if not url.startswith("http://"):
        return None
    netloc, _, path = url[len("http://") :].partition("/")
    host, _, port = netloc.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return host, int(port), ("/" + path).rstrip("/")


class Service:
    """A client of one running service: JSON requests and server-sent events over HTTP/1.0.

    A plain class, not a dataclass: `dataclasses` imports `inspect`, which a hook process would pay for.
    """

    __slots__ = ("connect_timeout", "read_timeout", "thin", "token", "url")

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
        thin: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.token = token
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.thin = dict(thin or {})  # command name -> its thin client ("module:function")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Service) and (self.url, self.token) == (other.url, other.token)

    def __hash__(self) -> int:
        return hash((self.url, self.token))

    def __repr__(self) -> str:
        return f"Service(url={self.url!r}, token={'***' if self.token else None})"

    def get(self, path: str, *, wait: float | None = None, **params: Any) -> dict[str, Any]:
        """GET path with query params (None values left out); the JSON object answered (`wait`: as for post)."""
        query = urlencode({k: v for k, v in params.items() if v is not None})
        return _json(self.request("GET", f"{path}?{query}" if query else path, wait=wait))

    def post(self, path: str, body: Any, *, wait: float | None = None) -> dict[str, Any]:
        """POST a JSON body to path; the JSON object answered (`wait`: seconds for its headers, if not the default)."""
        headers = {"Content-Type": "application/json"}
        return _json(self.request("POST", path, json.dumps(body).encode(), headers, wait=wait))

    def events(self, path: str, body: Any, *, wait: float | None = None) -> Iterator[tuple[str, Any]]:
        """POST a JSON body to path and yield its server-sent events as (event, decoded JSON data)."""
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        response = self.request("POST", path, json.dumps(body).encode(), headers, wait=wait)
        try:
            if response.status >= 400:
                _json(response)  # raises ServiceError with the service's line
            yield from sse_events(response)
        finally:
            response.close()

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        *,
        wait: float | None = None,
    ) -> Response:
        """Send one request; the response once its headers came within `wait` (default: the connect timeout).

        Raises ServiceUnavailable when the service cannot be reached or its headers do not come in time.
        """
        found = address(self.url)
        if found is None:
            raise ServiceUnavailable(f"service at {self.url}: not an http://HOST:PORT address")
        host, port, prefix = found
        target = prefix + quote(path, safe="/?&=%:@!$'()*+,;~-._")
        sent = {"Host": self.url.split("/")[2], "Accept": "application/json", "Connection": "close", **(headers or {})}
        if self.token:
            sent["Authorization"] = f"Bearer {self.token}"
        if body is not None:
            sent["Content-Length"] = str(len(body))
        head = f"{method} {target} HTTP/1.0\r\n" + "".join(f"{k}: {v}\r\n" for k, v in sent.items()) + "\r\n"
        try:
            connection = socket.create_connection((host, port), timeout=self.connect_timeout)
        except OSError as exc:
            raise ServiceUnavailable(f"service at {self.url}: {type(exc).__name__}: {exc}") from exc
        try:
            connection.settimeout(self.connect_timeout if wait is None else wait)
            connection.sendall(head.encode("latin-1") + (body or b""))
            response = Response(connection)
        except (OSError, ValueError) as exc:
            connection.close()
            raise ServiceUnavailable(f"service at {self.url}: {type(exc).__name__}: {exc}", sent=True) from exc
        connection.settimeout(self.read_timeout)
        return response


class Response:
    """One HTTP response read from a socket: status, reason, headers, then the body up to the connection's end."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.file = connection.makefile("rb")
        version, status, reason = (self.file.readline(65537).decode("latin-1").rstrip("\r\n").split(" ", 2) + [""])[:3]
        if not version.startswith("HTTP/") or not status.isdigit():
            raise ValueError(f"not an HTTP status line: {version} {status}")
        self.status, self.reason = int(status), reason
        self.headers: dict[str, str] = {}
        while (line := self.file.readline(65537).decode("latin-1").rstrip("\r\n")) != "":
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()

    def getheader(self, name: str, default: str = "") -> str:
        """The value of a response header (case-insensitive), or default."""
        return self.headers.get(name.lower(), default)

    def read(self) -> bytes:
        """The rest of the body."""
        return self.file.read()

    def __iter__(self) -> Iterator[bytes]:
        """The body line by line, as it arrives."""
        return iter(self.file.readline, b"")

    def close(self) -> None:
        """Close the connection."""
        self.file.close()
        self.connection.close()


def _json(response: Response) -> dict[str, Any]:
    """The response's JSON object; raises ServiceError on an error status, ServiceUnavailable if it breaks off."""
    try:
        raw = response.read()
    except OSError as exc:
        raise ServiceUnavailable(f"the service's answer broke off: {type(exc).__name__}: {exc}") from exc
    finally:
        response.close()
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        data = {}
    if response.status >= 400:
        message = data.get("error") if isinstance(data, dict) else None
        if not isinstance(message, str):
            message = f"the service answered {response.status} {response.reason}"
        raise ServiceError(response.status, message)
    if not isinstance(data, dict):
        raise ServiceError(response.status, f"the service answered {type(data).__name__}, not a JSON object")
    return data


def sse_events(lines: Any) -> Iterator[tuple[str, Any]]:
    """Server-sent events read from a binary line iterable, as (event, JSON-decoded data); 'message' if unnamed."""
    event, data = "message", list[str]()
    try:
        for raw in lines:
            line = raw.decode("utf-8").rstrip("\r\n")
            if not line:
                if data:
                    yield event, json.loads("\n".join(data))
                event, data = "message", []
            elif line.startswith(":"):
                continue
            else:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
    except OSError as exc:
        message = f"the service's event stream broke off: {type(exc).__name__}: {exc}"
        raise ServiceUnavailable(message, sent=True) from exc
    if data:
        yield event, json.loads("\n".join(data))
