"""Slack's HTTP Events API as an ASGI app, for a production server running several worker processes.

    export THOTH_CONFIG=/srv/agent/thoth.toml SLACK_BOT_TOKEN=... SLACK_SIGNING_SECRET=...
    uvicorn thoth_slack.asgi:app --host 0.0.0.0 --port 3000 --workers 3

Each worker process builds its own runtime and bridge when the server starts it (ASGI lifespan)
and ends its open sessions when the server stops it. With `[storage] url` set, the workers share
one PostgreSQL: a thread's messages are answered in order and once, whichever worker Slack's
requests reach (see `inbox.py`). Requests are dispatched off the server's event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from slack_bolt import BoltRequest, BoltResponse
from slack_bolt.adapter.asgi import SlackRequestHandler
from slack_bolt.adapter.asgi.http_request import AsgiHttpRequest

from .bridge import SlackBridge
from .serve import EVENTS_PATH
from .settings import load_settings

logger = logging.getLogger(__name__)


class ThreadedHandler(SlackRequestHandler):
    """Bolt's ASGI handler, running the (synchronous) app on a worker thread instead of the event loop."""

    async def dispatch(self, request: AsgiHttpRequest) -> BoltResponse:
        bolt = BoltRequest(body=await request.get_raw_body(), query=request.query_string, headers=request.get_headers())
        return await asyncio.to_thread(self.app.dispatch, bolt)


class SlackApp:
    """An ASGI app serving one bridge, built on the server's `lifespan.startup` from `$THOTH_CONFIG`."""

    def __init__(self, build: Callable[[], SlackBridge] | None = None) -> None:
        self.build = build or bridge_from_environment
        self.bridge: SlackBridge | None = None
        self.handler: ThreadedHandler | None = None

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http" and self.handler is not None:
            await self.handler(scope, receive, send)
        else:
            body = b"the Slack bridge is not running (it starts with the server's lifespan)"
            await send({"type": "http.response.start", "status": 503, "headers": [(b"content-type", b"text/plain")]})
            await send({"type": "http.response.body", "body": body})

    async def _lifespan(self, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    self.bridge = await asyncio.to_thread(self.build)
                    self.bridge.start()
                except Exception as exc:  # noqa: BLE001 - told to the server, which exits with it
                    await send({"type": "lifespan.startup.failed", "message": f"thoth slack: {exc}"})
                    return
                self.handler = ThreadedHandler(self.bridge.app, path=EVENTS_PATH)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.bridge is not None:
                    await asyncio.to_thread(self.bridge.stop)
                await send({"type": "lifespan.shutdown.complete"})
                return


def bridge_from_environment() -> SlackBridge:
    """A bridge on the runtime of `$THOTH_CONFIG` (or the nearest thoth.toml), in HTTP mode."""
    from thoth_core import Runtime

    runtime = Runtime.load()
    return SlackBridge(runtime, load_settings(runtime, http=True))


app = SlackApp()
