"""Running the bridge: Socket Mode (default) or an HTTP Events API endpoint (`--http PORT`)."""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import click
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.adapter.wsgi import SlackRequestHandler

from .bridge import SlackBridge, slack_call
from .settings import load_settings

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

EVENTS_PATH = "/slack/events"


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    """A WSGI server that serves each request on its own thread."""

    daemon_threads = True
    request_queue_size = 128  # socketserver's default of 5 drops bursts of Slack events


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        logger.debug("slack http: " + format, *args)


def http_server(bridge: SlackBridge, port: int, host: str = "127.0.0.1") -> ThreadingWSGIServer:
    """An HTTP server for Slack's requests on POST /slack/events (signatures checked by Bolt)."""
    handler = SlackRequestHandler(bridge.app, path=EVENTS_PATH)
    return make_server(host, port, handler, server_class=ThreadingWSGIServer, handler_class=_QuietHandler)  # type: ignore[return-value]


def socket_mode_handler(bridge: SlackBridge) -> SocketModeHandler:
    """A Socket Mode connection for the bridge's app (the URL comes from apps.connections.open)."""
    return SocketModeHandler(bridge.app, app_token=bridge.settings.app_token, web_client=bridge.client)


def start(
    runtime: Runtime,
    *,
    http_port: int | None = None,
    host: str = "127.0.0.1",
    stop: threading.Event | None = None,
    **_: Any,
) -> None:
    """Run the Slack frontend until Ctrl-C, SIGTERM or `stop`; every open session then ends with `exit`."""
    bridge = SlackBridge(runtime, load_settings(runtime, http=http_port is not None))
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    bridge.start()
    close: Callable[[], None] | None = None
    try:
        close = _connect(bridge) if http_port is None else _serve(bridge, http_port, host)
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        if close is not None:
            close()
        bridge.stop()


def _connect(bridge: SlackBridge) -> Callable[[], None]:
    """Open the Socket Mode connection; returns how to close it."""
    handler = socket_mode_handler(bridge)
    slack_call(handler.connect, "plugins.slack.app_token")
    click.echo(f"thoth slack: connected in Socket Mode as <@{bridge.bot_user}>; Ctrl-C to stop", err=True)
    return handler.close


def _serve(bridge: SlackBridge, port: int, host: str) -> Callable[[], None]:
    """Serve HTTP on a background thread; returns how to stop it."""
    server = http_server(bridge, port, host)
    threading.Thread(target=server.serve_forever, name="thoth-slack-http", daemon=True).start()
    click.echo(f"thoth slack: listening on http://{host}:{server.server_port}{EVENTS_PATH}; Ctrl-C to stop", err=True)

    def close() -> None:
        server.shutdown()
        server.server_close()

    return close
