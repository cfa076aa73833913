"""Answering each thread's pending messages in order, once, on whichever worker holds the thread.

`drain(thread)` runs on the bridge's loop after a message is recorded in the inbox: it claims
the thread (or leaves it to the worker that holds it, which looks again before letting go),
answers the pending messages oldest first, re-taking its claim before each (it stops if another
worker took the thread over), and releases the claim. A thread of its own renews this worker's
claims, so a busy or stalled loop does not let them lapse. `sweep()` runs every few seconds on
every worker: it drains the threads whose messages are due with no live holder (a worker killed
mid-turn, or a failure to reach Slack waited out). A store that is down is waited out
(`STORE_WAIT_SECONDS`) with the thread kept, so a restart changes neither who answers nor the order.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine
from http.client import HTTPException
from typing import Any

from slack_sdk.errors import SlackApiError

from .inbox import Inbox, Pending

logger = logging.getLogger(__name__)

RAW_KEEP = 10_000  # texts received here but answered elsewhere are forgotten past this many
RAW_KEEP_SECONDS = 3600.0  # ... or this old (a worker taking over answers from the stored text)
RETRYABLE: tuple[type[BaseException], ...] = (SlackApiError, OSError, HTTPException)  # Slack or the network down
ANSWERED, ELSEWHERE, STOPPED = "answered", "elsewhere", "stopped"
STORE_WAIT_SECONDS = 600.0  # a drain waits this long for a store that is down (it keeps its threads meanwhile)


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
        self._raw: OrderedDict[str, tuple[float, Pending, str]] = OrderedDict()  # key -> (when, message, text)
        self._raw_lock = threading.Lock()
        self._wanted: set[str] = set()
        self._draining: set[str] = set()
        self._renewing = threading.Event()
        self._renewer: threading.Thread | None = None

    # --- the texts as received here (the inbox keeps them redacted) ----------------------------

    def remember(self, pending: Pending, text: str) -> None:
        """Keep a message's text as received, for answering it here (the inbox has it redacted)."""
        now = time.monotonic()
        with self._raw_lock:
            self._raw[pending.key] = (now, pending, text)
            while self._raw and (
                len(self._raw) > RAW_KEEP or next(iter(self._raw.values()))[0] < now - RAW_KEEP_SECONDS
            ):
                self._raw.popitem(last=False)

    def text_of(self, pending: Pending) -> str:
        """The text to answer: as received here if it was, else as the inbox keeps it."""
        with self._raw_lock:
            kept = self._raw.get(pending.key)
        return pending.text if kept is None else kept[2]

    def answered(self, key: str) -> None:
        """Drop a message's text once it is answered."""
        with self._raw_lock:
            self._raw.pop(key, None)

    def forget(self, workspace: str, peer: str, thread: str | None = None) -> int:
        """Drop the texts of a peer's messages (or one thread's) held here; returns how many."""
        with self._raw_lock:
            gone = [
                key
                for key, (_, p, _) in self._raw.items()
                if (p.team, p.peer) == (workspace, peer) and thread in (None, p.thread)
            ]
            for key in gone:
                del self._raw[key]
        return len(gone)

    # --- claims ----------------------------------------------------------------------------

    def start_renewing(self) -> None:
        """Renew this worker's claims from a thread of its own, every fifth of `claim_seconds` (0.2 s to 5 s)."""
        every = min(5.0, max(0.2, self.inbox.claim_seconds / 5))
        self._renewing.clear()
        self._renewer = threading.Thread(target=self._renew_forever, args=(every,), name="slack-claims", daemon=True)
        self._renewer.start()

    def stop_renewing(self) -> None:
        """Stop renewing (the claims then lapse unless released)."""
        self._renewing.set()
        if self._renewer is not None:
            self._renewer.join(10)

    def _renew_forever(self, every: float) -> None:
        while not self._renewing.wait(every):
            try:
                self.inbox.renew(threads=frozenset(self._draining))  # not a claim whose release failed: it lapses
            except Exception as exc:  # noqa: BLE001 - e.g. the store unreachable for a moment: try again
                logger.warning("slack: renewing thread claims failed: %s: %s", type(exc).__name__, exc)

    # --- draining --------------------------------------------------------------------------

    async def drain(self, thread: str) -> None:
        """Answer the thread's pending messages if no other worker is at it; returns when none is left here."""
        self._wanted.add(thread)
        if thread in self._draining:
            return  # the running drain looks again before it returns
        self._draining.add(thread)
        try:
            while thread in self._wanted:
                self._wanted.discard(thread)
                try:
                    outcome = await self._answer_all(thread)
                finally:
                    await self._stored(lambda: self.inbox.release(thread))
                if outcome == ELSEWHERE:
                    return  # its holder looks for new messages before letting go; the sweep covers a dead one
                if outcome == ANSWERED and await self._stored(lambda: self.inbox.ready(thread)):
                    self._wanted.add(thread)  # arrived while we let go, and its receiver found us holding it
        finally:
            self._draining.discard(thread)

    async def _answer_all(self, thread: str) -> str:
        """Answer due messages oldest first while this worker holds the thread.

        ANSWERED once none is due, ELSEWHERE if another worker holds the thread (it took over),
        STOPPED if an answer failed (the message waits, then the sweep retries it).
        """
        done = 0
        while True:
            held, pending = await self._stored(lambda: self._take_next(thread))
            if not held:
                if done:
                    logger.warning("slack: another worker took %s over (this one's claim lapsed); leaving it", thread)
                return ELSEWHERE
            if pending is None:
                return ANSWERED
            try:
                await self.answer(pending)
            except Exception as exc:  # noqa: BLE001 - e.g. Slack unreachable: the message stays pending
                await self._failed(thread, pending, exc)
                return STOPPED
            done += 1

    async def _stored(self, action: Callable[[], Any]) -> Any:
        """A store action, in a worker thread, waiting out a store that is down."""
        return await asyncio.to_thread(self.inbox.db.patiently, action, STORE_WAIT_SECONDS)

    def _take_next(self, thread: str) -> tuple[bool, Pending | None]:
        """Re-take the thread's claim, then its next due message (None if none is, or the claim was lost meanwhile)."""
        if not self.inbox.claim(thread):
            return False, None
        return True, self.inbox.next(thread)

    async def _failed(self, thread: str, pending: Pending, exc: Exception) -> None:
        """Schedule the retry of a failed answer; a retryable failure does not use up one of its attempts."""
        retryable = isinstance(exc, RETRYABLE + self.inbox.db.errors)
        if retryable:
            logger.warning(
                "slack: answering a message in %s failed (%s: %s); retrying later", thread, type(exc).__name__, exc
            )
        else:
            logger.error("slack: answering a message in %s failed; retrying later", thread, exc_info=exc)
        try:
            await asyncio.to_thread(self.inbox.retry_later, pending, counted=not retryable)
        except self.inbox.db.errors as error:  # it stays pending, its attempt counted: the sweep retries it
            logger.warning("slack: could not schedule the retry of a message in %s: %s", thread, error)

    async def sweep(self) -> None:
        """Drain threads whose messages are due with no live holder."""
        for thread in await asyncio.to_thread(self.inbox.orphans):
            if thread not in self._draining:
                logger.info("slack: taking over %s (messages waiting without a live worker)", thread)
                self.spawn(self.drain(thread))
