"""Finding a home's service and talking to it: the advertisement file, the stdlib client, its bounded waits."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thoth_core.service import (
    Service,
    ServiceError,
    ServiceUnavailable,
    advertised,
    find_service,
    service_file,
    sse_events,
)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _send(self, status: int, payload: Any, content_type: str = "application/json") -> None:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self.server.seen.append(("GET", self.path, dict(self.headers), b""))  # type: ignore[attr-defined]
        if self.path.startswith("/v1/boom"):
            self._send(500, {"error": "the store is down"})
        else:
            self._send(200, {"path": self.path, "auth": self.headers.get("Authorization")})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        self.server.seen.append(("POST", self.path, dict(self.headers), body))  # type: ignore[attr-defined]
        if self.path.endswith("/turns"):
            events = [("delta", {"text": "Hel"}), ("delta", {"text": "lo"}), ("done", {"reply": "Hello"})]
            stream = "".join(f"event: {e}\ndata: {json.dumps(d)}\n\n" for e, d in events).encode()
            self._send(200, stream, "text/event-stream")
        elif self.path.endswith("/bad"):
            self._send(422, {"error": "text: field required"})
        else:
            self._send(200, {"echo": json.loads(body)})


@pytest.fixture
def fake_service() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.seen = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def url_of(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_advertised_writes_a_private_file_and_removes_it_at_exit(tmp_path):
    with advertised(tmp_path, url="http://127.0.0.1:8123", token="s3cret"):
        path = service_file(tmp_path)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        data = json.loads(path.read_text())
        assert data["url"] == "http://127.0.0.1:8123" and data["token"] == "s3cret" and data["pid"] == os.getpid()
        assert abs(data["started_at"] - time.time()) < 60
        found = find_service(tmp_path)
        assert found == Service(url="http://127.0.0.1:8123", token="s3cret")
    assert not service_file(tmp_path).exists()
    assert find_service(tmp_path) is None


def test_advertised_leaves_a_newer_services_file_alone(tmp_path):
    with advertised(tmp_path, url="http://127.0.0.1:1", token=None):
        service_file(tmp_path).write_text(json.dumps({"url": "http://127.0.0.1:2", "pid": os.getpid(), "token": None}))
    assert json.loads(service_file(tmp_path).read_text())["url"] == "http://127.0.0.1:2"


def test_a_dead_pid_or_a_broken_file_finds_no_service(tmp_path):
    path = service_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": dead_pid(), "token": None}))
    assert find_service(tmp_path) is None
    for bad in ("{", "[]", json.dumps({"url": "ftp://x", "pid": os.getpid()}), json.dumps({"pid": os.getpid()})):
        path.write_text(bad)
        assert find_service(tmp_path) is None, bad


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.binary(max_size=200), st.dictionaries(st.text(max_size=8), st.none() | st.integers() | st.text())))
def test_whatever_the_file_holds_find_service_answers_without_raising(tmp_path_factory, content):
    home = tmp_path_factory.mktemp("home")
    path = service_file(home)
    path.parent.mkdir(parents=True)
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    found = find_service(home)
    assert found is None or isinstance(found, Service)


def test_get_post_and_events_speak_json_and_sse_with_the_token(fake_service):
    service = Service(url=url_of(fake_service), token="tok")
    assert service.get("/v1/peers/ana/recall", q="the wifi", k=3, workspace=None) == {
        "path": "/v1/peers/ana/recall?q=the+wifi&k=3",
        "auth": "Bearer tok",
    }
    assert service.post("/v1/peers/ana/context", {"message": "hi"}) == {"echo": {"message": "hi"}}
    assert list(service.events("/v1/peers/ana/turns", {"text": "hi"})) == [
        ("delta", {"text": "Hel"}),
        ("delta", {"text": "lo"}),
        ("done", {"reply": "Hello"}),
    ]
    assert fake_service.seen[-1][2]["Accept"] == "text/event-stream"  # type: ignore[attr-defined]
    assert Service(url=url_of(fake_service)).get("/v1/health")["auth"] is None  # no token, no header


def test_an_error_status_raises_service_error_with_the_services_line(fake_service):
    service = Service(url=url_of(fake_service))
    with pytest.raises(ServiceError, match="the store is down") as raised:
        service.get("/v1/boom")
    assert raised.value.status == 500
    with pytest.raises(ServiceError, match="text: field required"):
        list(service.events("/v1/bad", {}))


def test_a_closed_port_raises_service_unavailable_at_once():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(ServiceUnavailable):
        Service(url=f"http://127.0.0.1:{port}").get("/v1/health")
    assert time.monotonic() - started < 1


def test_a_hung_server_raises_service_unavailable_after_the_bounded_wait():
    with socket.socket() as sock:  # listens (the kernel accepts connections) but never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        service = Service(url=f"http://127.0.0.1:{sock.getsockname()[1]}", connect_timeout=0.2)
        started = time.monotonic()
        with pytest.raises(ServiceUnavailable):
            service.post("/v1/peers/ana/context", {"message": "hi"})
        assert 0.15 < time.monotonic() - started < 2


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(alphabet=st.characters(categories=["L", "N"]), min_size=1, max_size=10),
            st.recursive(st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c, max_size=3)),
        ),
        max_size=6,
    )
)
def test_sse_events_reads_back_what_a_server_writes(events):
    def frame(name: str, data: Any) -> str:  # a multi-line payload goes out as one data: line per line
        return f"event: {name}\n" + "".join(f"data: {line}\n" for line in json.dumps(data, indent=1).split("\n")) + "\n"

    wire = "".join(frame(name, data) for name, data in events)
    lines = [line.encode() for line in wire.splitlines(keepends=True)]
    assert list(sse_events(lines)) == events


def test_importing_the_client_loads_no_heavy_module(tmp_path):
    script = (
        "import sys; import thoth_core.service; "
        "print(sorted(m for m in ('pydantic', 'pluggy', 'thoth_core.runtime', 'thoth_core.types', 'numpy') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert done.stdout.strip() == "[]", done.stderr


def test_the_advertisement_names_its_home(tmp_path: Path):
    assert service_file(tmp_path) == tmp_path / "run" / "service.json"


@given(st.text(max_size=20), st.text(max_size=20))
def test_the_query_encoding_is_urllib_s(key, value):
    from urllib.parse import quote as urllib_quote
    from urllib.parse import urlencode as urllib_urlencode

    from thoth_core.service import quote, urlencode

    assert urlencode({key: value}) == urllib_urlencode({key: value})
    assert quote(value, safe="") == urllib_quote(value, safe="")


def test_address_reads_the_advertised_urls_and_refuses_others():
    from thoth_core.service import address

    assert address("http://127.0.0.1:8766") == ("127.0.0.1", 8766, "")
    assert address("http://[::1]:41237/base/") == ("::1", 41237, "/base")
    for bad in ("https://127.0.0.1:1", "http://127.0.0.1", "http://:80", "http://h:0", "http://h:99999", "ftp://h:1"):
        assert address(bad) is None, bad
