"""Running the server: stdio (what `claude mcp add` starts) or streamable HTTP on a local port.

The runtime and the MCP server share one event loop. While serving, idle sessions are ended
every minute like in the other frontends; at exit every session the server opened is ended
(`session_end`, reason `exit`), then `thoth_core.cli.run` closes the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import signal
import socket
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

import click

from thoth_core.errors import ThothError

from .server import build_server

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from thoth_core import Runtime
    from thoth_core.scope import Scope

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8765
HTTP_PATH = "/mcp"
REAP_EVERY = 60.0  # seconds between checks for idle sessions


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and `localhost`."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


async def serve(runtime: Runtime, scope: Scope, *, http: bool, host: str, port: int) -> None:
    """Serve MCP until the client goes away (stdio) or the process is interrupted (HTTP)."""
    server = build_server(runtime, scope)
    reaper = asyncio.ensure_future(_reap_idle(runtime))
    try:
        if http:
            await serve_http(server, host, port)
        else:
            await server.run_stdio_async()
    finally:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper
        for session in list(runtime.sessions.values()):
            await runtime.end_session(session, "exit")


async def serve_http(server: MCPServer, host: str, port: int) -> None:
    """Streamable HTTP at http://HOST:PORT/mcp; port 0 picks a free one. The URL goes to stderr."""
    import uvicorn

    listener = _listen(host, port)
    if not is_loopback(host):
        click.echo(
            f"thoth mcp: warning: listening on {host}, not a loopback address: anyone who can reach it "
            "can read and delete this agent's memory (there is no authentication)",
            err=True,
        )
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, host=host)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    with _signals_end_serving_only():
        serving = asyncio.ensure_future(web.serve(sockets=[listener]))
        while not web.started and not serving.done():
            await asyncio.sleep(0.02)
        if web.started:
            bound_host, bound_port = listener.getsockname()[:2]
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            click.echo(f"thoth mcp: streamable HTTP at http://{shown}:{bound_port}{HTTP_PATH}", err=True)
        try:
            await serving
        finally:
            listener.close()


@contextlib.contextmanager
def _signals_end_serving_only() -> Iterator[None]:
    """Let SIGINT/SIGTERM stop uvicorn gracefully without killing us before the sessions are ended.

    uvicorn re-raises a signal it caught once it has shut down; with these handlers in place
    that re-raise is a no-op, so `serve` goes on to end the sessions and close the runtime.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port, or a ThothError naming them."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ThothError(f"--host: cannot resolve {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as exc:
        listener.close()
        raise ThothError(f"--port: cannot listen on {host}:{port}: {exc.strerror}") from exc
    return listener


async def _reap_idle(runtime: Runtime) -> None:
    while True:
        await asyncio.sleep(REAP_EVERY)
        try:
            await runtime.reap_idle()
        except Exception as exc:  # noqa: BLE001 - a failing plugin must not stop the server
            logger.error("thoth mcp: ending idle sessions failed: %s", exc)


__all__ = ["DEFAULT_PORT", "HTTP_PATH", "is_loopback", "serve", "serve_http"]
