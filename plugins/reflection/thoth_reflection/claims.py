"""Work that one worker does for all: a session's reflection, the nightly job, held under a claim in the store.

A claim is a row of the store's `claims` table taken by a conditional write (see `Store.claim`),
so of several processes sharing the store one holds it; a holder that died lets it lapse after
its `seconds`. Taking and giving back a claim is one short write; waiting for one sleeps on the event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from .store import Store

FIRST_POLL = 0.05  # seconds between tries at first, doubling up to LAST_POLL
LAST_POLL = 1.0


@asynccontextmanager
async def claimed(store: Store, key: str, *, seconds: float, wait: float = 0.0) -> AsyncIterator[bool]:
    """Hold the claim `key` while the block runs; yields False when another holder kept it for `wait` seconds."""
    deadline = time.monotonic() + wait
    delay = FIRST_POLL
    while not store.claim(key, seconds=seconds):
        if time.monotonic() >= deadline:
            yield False
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, LAST_POLL)
    try:
        yield True
    finally:
        store.release(key)
