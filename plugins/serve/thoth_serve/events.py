"""Live events of one service process (`GET /v1/events`): turns landed, records changed, approvals asked for.

A small fan-out: each subscriber gets its own bounded queue; a slow one loses the oldest events
instead of holding the others up. The runtime's `notify` hook and the service's own handlers publish.
With several workers, each process has its own bus: a client sees the events of the worker it reached.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

QUEUE = 256  # events a subscriber may fall behind before the oldest are dropped
KEEPALIVE = 15.0  # seconds between SSE comments on a quiet stream
CLOSE = "\x00close"  # the event that ends every stream


class EventBus:
    """Publish events to every current subscriber; never blocks the publisher."""

    def __init__(self) -> None:
        self.subscribers: set[asyncio.Queue[tuple[str, dict[str, Any]]]] = set()
        self.closed = False

    def close(self) -> None:
        """End every stream (the service is stopping: an open stream would hold its shutdown up)."""
        self.closed = True
        self.publish(CLOSE, {})

    def publish(self, event: str, data: dict[str, Any]) -> None:
        """Send an event (`turn`, `record`, `approval`, ...) to each subscriber (call it on the event loop)."""
        item = (event, {**data, "at": data.get("at", time.time())})
        for queue in list(self.subscribers):
            if queue.full():
                queue.get_nowait()
            queue.put_nowait(item)

    async def stream(self, *, peer: str | None = None) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """The events from now on (only those about `peer`, or about no one, when given); `ping` when quiet."""
        queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(QUEUE)
        self.subscribers.add(queue)
        try:
            while not self.closed:
                try:
                    event, data = await asyncio.wait_for(queue.get(), KEEPALIVE)
                except TimeoutError:
                    yield "ping", {}
                    continue
                if event == CLOSE:
                    return
                if peer is None or data.get("peer") in (None, peer):
                    yield event, data
        finally:
            self.subscribers.discard(queue)


def sse(event: str, data: Any) -> bytes:
    """One server-sent event: `event:` and one `data:` line of JSON."""
    return f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode()


__all__ = ["EventBus", "sse"]
