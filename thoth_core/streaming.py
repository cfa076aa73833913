"""A reply as it streams: each batch of text is synced to the turn's journal row before it is shown.

The runtime's `TurnWriter` (`writes.py`) makes one `StreamedReply` per model turn and gives it its
`progress` as the sync; this module knows nothing else of the journal.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .redact import settled
from .types import Reply, Turn

PROGRESS_EVERY = 0.05  # seconds: a streaming reply's journal row is synced at most this often, before each showing
SYNC_WAIT = 1.0  # seconds a batch waits for its sync before it is shown anyway (a stalled disk)

Sync = Callable[[Turn, Reply], Awaitable[None]]  # keeps the reply shown so far in the turn's journal row


class StreamedReply:
    """A reply as it streams: each batch of text is synced to the turn's journal row before it is shown.

    A batch is synced less a last word that may be the start of a secret (`redact.settled`): the
    redactor would miss it in part, so it waits for the next batch or the whole reply.

    Pieces arrive through `add`; one task shows them in order, syncing first what it is about to
    show (as a reply cut short), then waiting `PROGRESS_EVERY` s while more pieces gather. So the
    journal holds what the person has seen (but such a last word), whenever the process dies (unless a sync takes
    longer than `SYNC_WAIT`: then the words go out first and the journal catches up). When the
    stream has ended (`end`), the rest waits for the whole reply to be journaled (`finish`).
    """

    def __init__(
        self, sync: Sync, turn: Turn, model: str, show: Callable[[str], Any] | None, *, journaled: bool
    ) -> None:
        self.sync = sync
        self.turn = turn  # as kept (redacted)
        self.model = model
        self.show = show
        self.journaled = journaled
        self.parts: list[str] = []
        self.shown = 0  # how many parts were shown
        self._task: asyncio.Task[None] | None = None
        self._sync: asyncio.Task[None] | None = None  # the sync in flight
        self._hurry = asyncio.Event()  # no more pauses between batches
        self._ended = False  # the stream ended: no more syncs; the rest waits for `_whole`
        self._whole = asyncio.Event()  # the whole reply is journaled (or could not be): show the rest
        self._synced_at = float("-inf")

    @property
    def text(self) -> str:
        """Everything received so far."""
        return "".join(self.parts)

    def add(self, piece: str) -> None:
        """Take the next piece; it is shown once the journal holds it. Raises what showing an earlier one raised."""
        self.parts.append(piece)
        if self._task is not None and self._task.done():
            self._task.result()
            self._task = None
        if self._task is None:
            self._task = asyncio.ensure_future(self._show())

    async def _show(self) -> None:
        while self.shown < len(self.parts):
            wait = self._synced_at + PROGRESS_EVERY - time.monotonic()
            if wait > 0 and not self._hurry.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._hurry.wait(), wait)
            upto = len(self.parts)
            if self._ended:
                await self._whole.wait()
            elif self.journaled:
                if self._sync is None or self._sync.done():  # a sync still running is waited for, not joined
                    self._synced_at = time.monotonic()
                    reply = Reply.cut(settled("".join(self.parts[:upto])), model=self.model)
                    self._sync = asyncio.ensure_future(self.sync(self.turn, reply))
                with contextlib.suppress(TimeoutError):  # a stalled disk delays the words, never stops them
                    await asyncio.wait_for(asyncio.shield(self._sync), SYNC_WAIT)
            while self.shown < upto:
                piece = self.parts[self.shown]
                self.shown += 1
                if self.show is not None:
                    outcome = self.show(piece)
                    if inspect.isawaitable(outcome):
                        await outcome

    async def end(self) -> None:
        """The stream ended: stop syncing, and wait for the sync in flight (the whole reply is journaled next)."""
        self._ended = True
        self._hurry.set()
        if self._sync is not None:
            await self._sync

    async def finish(self) -> None:
        """Show the rest: the whole reply was journaled (`TurnWriter.start`). Raises what showing raised."""
        self._whole.set()
        if self._task is not None:
            await self._task

    async def stop(self) -> Reply:
        """The stream failed: show (journaled first) what was received; returns the reply kept, cut short."""
        self._hurry.set()
        if self._task is not None:
            with contextlib.suppress(Exception):  # showing failed: the reply is what was shown before
                await self._task
        if self._sync is not None:
            await self._sync
        return self.cut()

    def cut(self) -> Reply:
        """The reply as far as it was shown, marked cut short (stops showing more)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
        return Reply.cut("".join(self.parts[: self.shown]), model=self.model)
