"""The real Honcho of `../shared/honcho-real` for tests and the bench: start, stop, hang, slow, a second API with auth.

`start DIR` builds the server under DIR once (1.5-3 min) and later starts it in seconds, so
DIR lives outside the clone: `$THOTH_HONCHO_REAL_DIR`, else `${XDG_CACHE_HOME:-~/.cache}/thoth-tests/honcho-real`
when PostgreSQL's system user can reach it (as root every parent folder must be readable by
others; `/root` usually is not), else `/var/tmp/thoth-tests/honcho-real`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .fake_honcho import free_port

START_TIMEOUT = 900.0


def scripts_folder(repo: Path) -> Path:
    """Where `start` and `stop` are: `../shared/honcho-real` beside the clone."""
    return (repo / ".." / "shared" / "honcho-real").resolve()


def reachable_by_others(path: Path) -> bool:
    """Whether every existing folder from / down to path can be entered by other users."""
    for folder in [*reversed(path.parents), path]:
        if folder.exists() and not os.stat(folder).st_mode & 0o005 == 0o005:
            return False
    return True


def server_dir() -> Path:
    """The DIR to build and run the server in (see the module docstring)."""
    if os.environ.get("THOTH_HONCHO_REAL_DIR"):
        return Path(os.environ["THOTH_HONCHO_REAL_DIR"])
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "thoth-tests" / "honcho-real"
    if os.geteuid() != 0 or reachable_by_others(cache):
        return cache
    return Path("/var/tmp/thoth-tests/honcho-real")


class HonchoRealError(RuntimeError):
    """The real server could not be started; the message names the log to read."""


def start(scripts: Path, folder: Path) -> tuple[str, bool]:
    """Start (building on first use) the server; its URL and whether it was already running."""
    if os.geteuid() == 0:
        folder.parent.mkdir(parents=True, exist_ok=True)
        folder.parent.chmod(0o755)
    try:
        done = subprocess.run(
            [str(scripts / "start"), str(folder)], capture_output=True, text=True, timeout=START_TIMEOUT
        )
    except subprocess.TimeoutExpired as exc:
        message = f"honcho-real start {folder} took over {START_TIMEOUT:.0f}s (logs: {folder}/logs)"
        raise HonchoRealError(message) from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines or not lines[-1].startswith("HONCHO_URL="):
        failed = [line for line in done.stderr.splitlines() if "FAILED" in line] or done.stderr.splitlines()[-1:]
        why = " ".join(failed) or "no output"
        raise HonchoRealError(f"honcho-real start {folder} failed: {why} (logs: {folder}/logs)")
    return lines[-1].split("=", 1)[1], "already running" in done.stderr


def stop(scripts: Path, folder: Path) -> None:
    """Stop what `start` started (the data stays)."""
    subprocess.run([str(scripts / "stop"), str(folder)], capture_output=True, text=True, timeout=120)


def fresh_start(scripts: Path, folder: Path) -> str:
    """A server started just now (stopped first if it was running), so its first requests are cold."""
    url, was_running = start(scripts, folder)
    if was_running:
        stop(scripts, folder)
        url, _ = start(scripts, folder)
    return url


def api_pid(folder: Path) -> int:
    """The PID of the Honcho API process (the leader of its process group)."""
    return int((folder / "run" / "honcho_api.pid").read_text().split()[0])


def hang(folder: Path) -> None:
    """Stop the API's process group (SIGSTOP): connections are accepted, nothing answers."""
    os.killpg(api_pid(folder), signal.SIGSTOP)


def resume(folder: Path) -> None:
    """Let a hung API go on (SIGCONT)."""
    os.killpg(api_pid(folder), signal.SIGCONT)


def healthy(url: str, timeout: float = 2.0) -> bool:
    """Whether `url/health` answers 200."""
    try:
        return urllib.request.urlopen(f"{url}/health", timeout=timeout).status == 200
    except OSError:
        return False


def jwt(secret: str, claims: dict[str, object]) -> str:
    """An HS256 JWT as Honcho's `create_jwt` makes it."""

    def part(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = part(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    body = part(json.dumps(claims).encode())
    signature = hmac.new(secret.encode(), f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{part(signature)}"


class AuthApi:
    """A second real Honcho API on the same database with `AUTH_USE_AUTH=true` (start's own API has auth off)."""

    def __init__(self, folder: Path, secret: str = "thoth-test-secret") -> None:
        self.folder, self.secret = folder, secret
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> AuthApi:
        """Start it and wait for /health; a HonchoRealError names the log when it does not come up."""
        env = {**os.environ}
        for line in (self.folder / "run" / "honcho.env").read_text().splitlines():
            name, _, value = line.partition("=")
            env[name] = value
        env.update(AUTH_USE_AUTH="true", AUTH_JWT_SECRET=self.secret)
        log = self.folder / "logs" / "honcho_api_auth.log"
        python = str(self.folder / "venv" / "bin" / "python")
        with log.open("ab") as out:
            self.process = subprocess.Popen(
                [python, "-m", "uvicorn", "src.main:app", "--host", "127.0.0.1", "--port", str(self.port)],
                cwd=self.folder / "honcho",
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        until = time.monotonic() + timeout
        while not healthy(self.url, 1.0):
            if self.process.poll() is not None or time.monotonic() > until:
                self.stop()
                raise HonchoRealError(f"the Honcho API with auth did not start (see {log})")
            time.sleep(0.3)
        return self

    def key(self, **claims: object) -> str:
        """A key for this server, e.g. `key(ad=True)` (admin) or `key(w="thoth")` (one workspace)."""
        return jwt(self.secret, {"t": str(int(time.time())), **claims})

    def stop(self) -> None:
        """Stop the process group this object started."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        self.process = None


class SlowProxy:
    """A loopback HTTP proxy in front of a Honcho that holds the requests matching `pattern` (e.g. its dialectic).

    A held request goes on after a random delay in `delay` (seconds, low and high), or, with
    `hold`, once `release` is set; the rest pass at once. Honcho itself is untouched: this is a
    slow network or a slow LLM behind the dialectic, as the client sees it.
    """

    def __init__(
        self, upstream: str, pattern: str = r"/chat$", delay: tuple[float, float] = (0.0, 0.0), *, hold: bool = False
    ) -> None:
        self.upstream, self.pattern, self.delay, self.hold = urlsplit(upstream), re.compile(pattern), delay, hold
        self.release = threading.Event()
        self.held = 0  # requests held so far
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The base URL to give the SDK."""
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> SlowProxy:
        """Listen on a free loopback port in a daemon thread."""
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except OSError:
                    pass  # the client went away (it gave up, or its process ended)

            def _handle(self) -> None:
                proxy.forward(self)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Let held requests go and stop listening."""
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def forward(self, request: BaseHTTPRequestHandler) -> None:
        """Send one request upstream (after holding it, when it matches) and its answer back."""
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else None
        if self.pattern.search(urlsplit(request.path).path):
            self.held += 1
            if self.hold:
                self.release.wait(120)
            else:
                time.sleep(random.uniform(*self.delay))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "connection")}
        upstream = http.client.HTTPConnection(self.upstream.hostname or "127.0.0.1", self.upstream.port, timeout=120)
        try:
            upstream.request(request.command, request.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            request.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in ("transfer-encoding", "connection", "content-length"):
                    request.send_header(name, value)
            request.send_header("Content-Length", str(len(data)))
            request.end_headers()
            request.wfile.write(data)
        except OSError:
            request.close_connection = True  # the client gave up (or Honcho went away)
        finally:
            upstream.close()


# `thoth context` in a process that finalizes as Python does (through `cli`, not `thoth`'s `main`,
# which ends with os._exit), whose first atexit callback, so the last to run, connects to port argv[1].
CONTEXT_THEN_FINALIZE = """
import atexit, socket, sys

def finalizing_now():
    socket.create_connection(("127.0.0.1", int(sys.argv[1]))).close()

atexit.register(finalizing_now)
from thoth_core.cli import cli

cli(["context", "green tea", "--peer", "ann", "--json"], prog_name="thoth", standalone_mode=False)
"""


class ExitSignal:
    """A loopback listener: when a process connects (from its last atexit callback), `then` runs `delay` s later."""

    def __init__(self, then: Callable[[], object], delay: float = 0.0) -> None:
        self.then, self.delay, self.calls = then, delay, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, name="exit-signal", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            connection.close()
            self.calls += 1
            time.sleep(self.delay)
            self.then()

    def close(self) -> None:
        """Stop listening."""
        self.sock.close()
