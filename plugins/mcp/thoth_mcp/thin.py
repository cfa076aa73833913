"""`thoth mcp` over stdio as a relay to the home's running service (`thoth serve`, its /mcp endpoint).

An MCP client (Claude Code, Claude Desktop) starts `thoth mcp` and speaks newline-delimited
JSON-RPC on its stdin and stdout. When a service runs for the home, this process imports neither the
runtime nor the MCP SDK: each message read from stdin is POSTed to the service's streamable HTTP
endpoint (with the `Mcp-Session-Id` the service gave at initialize, and the negotiated protocol
version), and each JSON-RPC message of the answer (JSON, or server-sent `message` events) is written
to stdout as one line; requests run on threads of their own, so a slow tool call does not hold the
next one. At the end of stdin the session is deleted. The relay serves only when its pins are the
service's (no --workspace, and --peer, if given, the peer the service is pinned to; /v1/health says
which); otherwise, and when the service is not reached before the first message, `thoth mcp` runs in-process.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

from thoth_core.service import Service, ServiceError, ServiceUnavailable, sse_events

PATH = "/mcp"  # as thoth_mcp.serve.HTTP_PATH (not imported: it imports the SDK)
CALL_WAIT = 600.0  # seconds a relayed request may take to its answer's headers (a tool call may run long)


class Relay:
    """One MCP session relayed between stdio and the service."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.session: str | None = None
        self.version: str | None = None
        self.out = threading.Lock()
        self.calls: list[threading.Thread] = []

    def headers(self) -> dict[str, str]:
        """The streamable HTTP headers of this session."""
        sent = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        if self.session:
            sent["Mcp-Session-Id"] = self.session
        if self.version:
            sent["MCP-Protocol-Version"] = self.version
        return sent

    def emit(self, message: Any) -> None:
        """One JSON-RPC message to stdout, as one line."""
        line = json.dumps(message, separators=(",", ":"))
        with self.out:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def send(self, raw: str) -> None:
        """POST one message and relay every message of the answer; a failure answers the request with an error."""
        try:
            message = json.loads(raw)
        except ValueError:
            self.emit({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
            return
        try:
            response = self.service.request("POST", PATH, raw.encode(), self.headers(), wait=CALL_WAIT)
            try:
                if self.session is None and response.getheader("Mcp-Session-Id"):
                    self.session = response.getheader("Mcp-Session-Id")
                kind = response.getheader("Content-Type", "")
                if response.status >= 400:
                    text = response.read().decode("utf-8", "replace").strip()
                    raise ServiceError(response.status, text or f"HTTP {response.status}")
                if kind.startswith("text/event-stream"):
                    for _event, data in sse_events(response):
                        self.answer(data)
                else:
                    raw_answer = response.read()
                    if raw_answer.strip():
                        self.answer(json.loads(raw_answer))
            finally:
                response.close()
        except (ServiceError, ServiceUnavailable, ValueError) as exc:
            if isinstance(message, dict) and "id" in message and "method" in message:
                error = {"code": -32603, "message": f"thoth mcp: the service failed this call: {exc}"}
                self.emit({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def answer(self, data: Any) -> None:
        """Relay one message (or a batch) from the service; note the protocol version initialize settled on."""
        for item in data if isinstance(data, list) else [data]:
            result = item.get("result") if isinstance(item, dict) else None
            if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str) and self.version is None:
                self.version = result["protocolVersion"]
            self.emit(item)

    def run(self, first: str) -> int:
        """Relay until stdin ends; the first message is sent before any other (initialize)."""
        self.send(first)
        for line in sys.stdin:
            if line.strip():
                call = threading.Thread(target=self.send, args=(line.strip(),), daemon=True)
                call.start()
                self.calls.append(call)
                self.calls = [c for c in self.calls if c.is_alive()]
        for call in self.calls:
            call.join(CALL_WAIT)
        if self.session:
            try:
                self.service.request("DELETE", PATH, None, self.headers()).close()
            except ServiceUnavailable:
                pass
        return 0


def parse(args: list[str]) -> dict[str, str] | None:
    """`--peer P` / `--workspace W` (either spelling); None for anything else (--http, --help: in-process)."""
    options: dict[str, str] = {}
    rest = list(args)
    while rest:
        name, equals, value = rest.pop(0).partition("=")
        if name not in ("--peer", "--workspace"):
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        options[name] = value
    return options


def main(service: Service, args: list[str]) -> int | None:
    """`thoth mcp [--peer P]` over stdio through the service; None to serve in-process."""
    options = parse(args)
    if options is None or "--workspace" in options:
        return None
    health = service.get("/v1/health")  # within the connect timeout: a hung service leaves it to in-process
    if options.get("--peer") != health.get("peer"):
        return None  # pinned differently: the service would let this client use other peers' memory, or refuse it
    first = ""
    while not first.strip():
        first = sys.stdin.readline()
        if not first:
            return 0  # stdin ended before any message
    return Relay(service).run(first.strip())


__all__ = ["Relay", "main"]
