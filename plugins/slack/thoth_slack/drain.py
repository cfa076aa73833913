"""Answering each thread's pending messages in order, once, on whichever worker holds the thread.

`drain(thread)` runs on the bridge's loop after a message is recorded in the inbox: it claims
the thread (or leaves it to the worker that holds it, which looks again before letting go),
answers the pending messages oldest first, and releases the claim. `sweep()` runs every few
seconds on every worker: it renews this worker's claims and drains the threads whose messages
wait with no live holder (a worker killed mid-turn, or a failure to reach Slack).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from .inbox import Inbox, Pending

logger = logging.getLogger(__name__)

RAW_KEEP = 10_000  # texts received here but answered elsewhere are forgotten past this many


class ThreadDrain:
    """The per-thread queue runner of one worker."""

    def __init__(
        self,
        inbox: Inbox,
        answer: Callable[[Pending], Awaitable[None]],
        spawn: Callable[[Coroutine[Any, Any, Any]], Any],
    ) -> None:
        self.inbox = inbox
        self.answer = answer
        self.spawn = spawn  # runs a drain in the background, tracked so that stopping waits for it
        self.raw: dict[str, str] = {}  # inbox key -> the text as received here (the inbox keeps it redacted)
        self._wanted: set[str] = set()
        self._draining: set[str] = set()

    def remember(self, key: str, text: str) -> None:
        """Keep a message's text as received, for answering it here (the inbox has it redacted)."""
        self.raw[key] = text
        while len(self.raw) > RAW_KEEP:
            self.raw.pop(next(iter(self.raw)))

    async def drain(self, thread: str) -> None:
        """Answer the thread's pending messages if no other worker is at it; returns when none is left here."""
        self._wanted.add(thread)
        if thread in self._draining:
            return  # the running drain looks again before it returns
        self._draining.add(thread)
        try:
            while thread in self._wanted:
                self._wanted.discard(thread)
                if not await asyncio.to_thread(self.inbox.claim, thread):
                    return  # its holder looks for new messages before letting go; the sweep covers a dead one
                try:
                    failed = await self._answer_all(thread)
                finally:
                    await asyncio.to_thread(self.inbox.release, thread)
                if not failed and await asyncio.to_thread(self.inbox.has_pending, thread):
                    self._wanted.add(thread)  # arrived while we let go, and its receiver found us holding it
        finally:
            self._draining.discard(thread)

    async def _answer_all(self, thread: str) -> bool:
        """Answer pending messages oldest first; True if one failed (left for the sweep to retry)."""
        while (pending := await asyncio.to_thread(self.inbox.next, thread)) is not None:
            try:
                await self.answer(pending)
            except Exception:  # noqa: BLE001 - e.g. Slack unreachable: the message stays pending
                logger.exception("slack: answering a message in %s failed; it is retried", thread)
                return True
        return False

    async def sweep(self) -> None:
        """Renew this worker's claims; drain threads whose messages wait with no live holder."""
        await asyncio.to_thread(self.inbox.renew)
        for thread in await asyncio.to_thread(self.inbox.orphans):
            if thread not in self._draining:
                logger.info("slack: taking over %s (messages waiting without a live worker)", thread)
                self.spawn(self.drain(thread))
