"""`thoth mcp` over stdio as a relay to a running service's /mcp (streamable HTTP), without the MCP SDK.

The service here is a small stdlib server speaking the streamable HTTP transport's wire format
(the session id header from initialize, answers as JSON or as server-sent `message` events, 202 for
notifications, DELETE at the end); the relay against the real `thoth serve` is in the root tests
(tests/test_warm_paths.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from thoth_core.service import advertised

SESSION = "sess-42"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass

    def _reply(self, status: int, body: bytes = b"", kind: str = "application/json", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        self._reply(200, json.dumps({"status": "ok", "peer": self.server.pin, "workspace": "default"}).encode())  # type: ignore[attr-defined]

    def do_DELETE(self) -> None:  # noqa: N802 - the stdlib's name
        self.server.log.append(("DELETE", self.headers.get("Mcp-Session-Id"), None))  # type: ignore[attr-defined]
        self._reply(200)

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.log.append(("POST", self.headers.get("Mcp-Session-Id"), message))  # type: ignore[attr-defined]
        if "id" not in message:
            self._reply(202)
        elif message["method"] == "initialize":
            result = {"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "thoth"}}
            body = json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).encode()
            self._reply(200, body, Mcp_Session_Id=SESSION)
        elif message["method"] == "slow":
            time.sleep(1.0)
            self._reply(200, json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": "slow"}).encode())
        else:
            version = self.headers.get("MCP-Protocol-Version")
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"echo": message["method"], "version": version}}
            progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
            events = "".join(f"event: message\ndata: {json.dumps(m)}\n\n" for m in (progress, answer))
            self._reply(200, events.encode(), "text/event-stream")


@pytest.fixture
def service(thoth_env: Path, thoth_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ThreadingHTTPServer]:
    monkeypatch.delenv("THOTH_LOAD_PLUGINS", raising=False)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.log = []  # type: ignore[attr-defined]
    server.pin = None  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with advertised(thoth_home, url=f"http://127.0.0.1:{server.server_address[1]}", token=None):
            yield server
    finally:
        server.shutdown()
        server.server_close()


PROBE = """
import json, sys
from thoth_core.thin import run_thin
code = run_thin(sys.argv[1:])
sys.stdout.flush()
heavy = [m for m in ("mcp", "pydantic", "click", "thoth_core.runtime", "anyio") if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy}), file=sys.stderr)
"""


def relay(*args: str, messages: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "mcp", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env=os.environ,
    )
    return [json.loads(line) for line in done.stdout.splitlines()], json.loads(done.stderr.strip().splitlines()[-1])


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18"}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def test_the_relay_carries_a_session_between_stdio_and_the_service(service):
    calls = [{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}]
    out, probe = relay(messages=[INITIALIZE, INITIALIZED, *calls])
    assert probe == {"code": 0, "heavy": []}  # no MCP SDK, no runtime in the relay's process
    assert out[0]["result"]["serverInfo"] == {"name": "thoth"}
    assert out[1:] == [
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}},
        {"jsonrpc": "2.0", "id": 2, "result": {"echo": "tools/list", "version": "2025-06-18"}},
    ]
    log = service.log
    assert log[0] == ("POST", None, INITIALIZE)
    assert [entry[1] for entry in log[1:]] == [SESSION, SESSION, SESSION]  # the session id on every later request
    assert log[-1] == ("DELETE", SESSION, None)


def test_a_slow_call_does_not_hold_the_next_one(service):
    slow = {"jsonrpc": "2.0", "id": 2, "method": "slow"}
    quick = {"jsonrpc": "2.0", "id": 3, "method": "ping"}
    out, probe = relay(messages=[INITIALIZE, slow, quick])
    assert probe["code"] == 0
    assert [m.get("id") for m in out if "id" in m] == [1, 3, 2]


def test_pins_other_than_the_services_serve_in_process(service):
    for args in (["--peer", "ana"], ["--workspace", "team"], ["--http"]):
        _, probe = relay(*args, messages=[])
        assert probe["code"] is None, args
    service.pin = "ana"
    out, probe = relay("--peer=ana", messages=[INITIALIZE])
    assert probe["code"] == 0 and out[0]["id"] == 1
