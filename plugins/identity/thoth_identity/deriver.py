"""When and how the embedded backend derives: a peer's waiting turns together, in one model call.

Each turn's user message is queued in the store (`pending.py`) by its post-turn write. The
peer's waiting messages are derived when `derive_every` of them wait (1: after every turn, one
request each), when the oldest has waited `derive_idle` seconds (checked by the next write in
any process, and by a timer in a running one), and when a session of the peer ends
(`derive_at_session_end`). A batch is one request (`derive.derive_batch`, at most `BATCH_MAX`
turns); a message that asks to set rules aside is derived alone, as it would be after its turn,
so the write policy's `source-held` judgement stays per message. What each message yields is
kept exactly as per-turn derivation keeps it (`keep`), then the message leaves the queue.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from thoth_core.redact import redactor_of

from . import pending
from .graph import assert_fact
from .policy import DERIVER, derives_from, screen_derivation

if TYPE_CHECKING:
    from .derive import Derivation
    from .embedded import EmbeddedBackend

logger = logging.getLogger(__name__)

BATCH_MAX = 20  # turns in one derivation request
BATCH_CHARS = 48_000  # about 12k tokens of messages and replies in one request; a longer batch is split
REPLY_CHARS = 4_000  # of the assistant's reply before a message, in a batch
NOTHING, AGAIN, ALL = 0, 1, 2  # what was asked of a running derivation meanwhile
WRITES_WAIT = 5.0  # seconds a session's end waits for the post-turn writes under way (its last turn's)


class Deriver:
    """The derivation schedule of one embedded backend: triggers, batches, the idle timers of a running process."""

    def __init__(self, backend: EmbeddedBackend) -> None:
        self.backend = backend
        self.settings = backend.settings
        self.store = backend.store
        self._busy: dict[tuple[str, str], int] = {}  # peers being derived here -> asked again meanwhile
        self._timers: dict[tuple[str, str], asyncio.TimerHandle] = {}
        self.writing: Counter[tuple[str, str]] = Counter()  # post-turn writes of a peer under way here

    async def turn_stored(self, workspace: str, peer: str, message_id: int) -> None:
        """Queue a stored turn's message; derive the peer's waiting turns when a trigger fires, else arm the timer."""
        await asyncio.to_thread(pending.queue, self.store, workspace, peer, message_id)
        if await asyncio.to_thread(self.due, workspace, peer):
            await self.derive_waiting(workspace, peer, everything=False)
        else:
            self._arm(workspace, peer)

    def due(self, workspace: str, peer: str) -> bool:
        """Whether `derive_every` of a peer's turns wait unclaimed, or the oldest waited `derive_idle` (blocking)."""
        count, oldest = pending.waiting(self.store, workspace, peer)
        idle = self.settings.derive_idle
        return count >= self.settings.derive_every or bool(idle and oldest is not None and time.time() - oldest >= idle)

    def _arm(self, workspace: str, peer: str) -> None:
        """(Re)start the peer's idle timer in this process's loop."""
        if not self.settings.derive_idle:
            return
        key = (workspace, peer)
        if (old := self._timers.pop(key, None)) is not None:
            old.cancel()
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(self.settings.derive_idle, self._idle, workspace, peer)

    def _idle(self, workspace: str, peer: str) -> None:
        self._timers.pop((workspace, peer), None)
        self.backend.runtime.background(self.derive_waiting(workspace, peer))

    async def session_ended(self, workspace: str, peer: str) -> int:
        """Derive what waits of a peer once the post-turn writes under way here are done (the last turn's, too)."""
        until = time.monotonic() + WRITES_WAIT
        while self.writing[(workspace, peer)] and time.monotonic() < until:
            await asyncio.sleep(0.02)
        return await self.derive_waiting(workspace, peer)

    async def derive_waiting(self, workspace: str, peer: str, *, everything: bool = True) -> int:
        """Derive a peer's waiting messages, oldest first, in batches: all of them, or (`everything=False`, a
        turn's trigger) while a trigger holds, so a batch is not cut into a full one and a straggler; how many."""
        key = (workspace, peer)
        if key in self._busy:  # the running derivation looks again when it is done (at all of them: ALL)
            self._busy[key] = max(self._busy[key], ALL if everything else AGAIN)
            return 0
        self._busy[key] = NOTHING
        if (timer := self._timers.pop(key, None)) is not None:
            timer.cancel()
        derived = 0
        failed: set[int] = set()  # released for the next trigger, not tried again now
        try:
            model = await asyncio.to_thread(self.backend.model)
            if model is None:
                return 0
            limit = 1 if self.settings.derive_every <= 1 else BATCH_MAX
            while True:
                rows: list[dict[str, Any]] = []
                if everything or await asyncio.to_thread(self.due, workspace, peer):
                    rows = await asyncio.to_thread(pending.claim, self.store, workspace, peer, limit=limit, skip=failed)
                for batch in await asyncio.to_thread(batches, rows):
                    if await self._derive(model, workspace, peer, batch):
                        derived += len(batch)
                    else:
                        failed.update(row["message_id"] for row in batch)
                if rows:
                    continue
                if self._busy[key] != NOTHING:  # a turn's trigger, or a session's end, came meanwhile
                    everything = everything or self._busy[key] == ALL
                    self._busy[key] = NOTHING
                    continue
                break
        finally:
            self._busy.pop(key, None)
        if not everything and await asyncio.to_thread(pending.waiting, self.store, workspace, peer) != (0, None):
            self._arm(workspace, peer)
        return derived

    async def _derive(self, model: Any, workspace: str, peer: str, rows: list[dict[str, Any]]) -> bool:
        """One request for these messages, then keep what each yields; a failure releases them for another try."""
        from .derive import derive, derive_batch

        ids = [row["message_id"] for row in rows]
        try:
            if len(rows) == 1:
                [row] = rows
                derivations = [await derive(model, peer=peer, user_text=row["text"], previous_reply=row["previous"])]
            else:
                turns = [(row["text"], _cut(row["previous"])) for row in rows]
                derivations = await derive_batch(model, peer=peer, turns=turns)
        except Exception as exc:  # noqa: BLE001 - a bad answer costs these messages' observations, no more
            logger.warning(
                "identity: deriving observations for %s failed: %s: %s", peer, type(exc).__name__, str(exc)[:300]
            )
            given_up = await asyncio.to_thread(pending.failed, self.store, ids)
            if given_up:
                logger.warning("identity: %d message(s) of %s left underived after failed tries", len(given_up), peer)
            return False
        for row, derivation in zip(rows, derivations, strict=True):
            await self.keep(workspace, peer, row["message_id"], row["text"], derivation)
        return True

    async def keep(self, workspace: str, peer: str, message_id: int, text: str, derivation: Derivation) -> None:
        """Keep what the policy shows of one message's derivation, count the rest, and take it off the queue."""
        key = (workspace, peer)
        if await asyncio.to_thread(self.store.derived_from, *key, message_id):  # another worker kept it already
            await asyncio.to_thread(pending.done, self.store, [message_id])
            return
        redact = redactor_of(self.backend.runtime).redact  # judged as they would be kept
        observations = [{**item, "content": redact(item["content"])} for item in derivation.observations]
        facts = [{**f, "subject": redact(f["subject"]), "value": redact(f["value"])} for f in derivation.facts]
        screened = await asyncio.to_thread(
            screen_derivation, observations, facts, peer=peer, message=text
        )  # a thread: the first judgement loads the word list
        if screened.withheld:
            await asyncio.to_thread(self.store.add_withheld, *key, message_id, dict(screened.withheld))
            logger.info(
                "identity: the write policy withheld %d derived item(s) about %s from message %d (%s)",
                sum(screened.withheld.values()),
                peer,
                message_id,
                screened.summary(),
            )
        source = f"message:{message_id}"
        for item in screened.observations:
            await asyncio.to_thread(
                self.store.add_observation,
                *key,
                item["content"],
                kind=item["kind"],
                author=DERIVER,
                confidence=item["confidence"],
                source=source,
                message_id=message_id,
            )
        for fact in screened.facts:
            if fact["confidence"] >= self.settings.fact_confidence:
                await asyncio.to_thread(
                    assert_fact,
                    self.store,
                    *key,
                    subject=fact["subject"],
                    predicate=fact["predicate"],
                    value=fact["value"],
                    confidence=fact["confidence"],
                    source=f"derived:{source}",
                )
        await asyncio.to_thread(self.store.mark_derived, message_id)
        await asyncio.to_thread(pending.done, self.store, [message_id])

    def close(self) -> None:
        """Stop the idle timers (what waits stays queued in the store)."""
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


def batches(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Claimed messages in requests: in order, within `BATCH_CHARS`; one that asks to set rules aside alone."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for row in rows:
        length = len(row["text"]) + len(_cut(row["previous"]) or "")
        if not derives_from(row["text"]):
            out += [current, [row]] if current else [[row]]
            current, size = [], 0
            continue
        if current and size + length > BATCH_CHARS:
            out.append(current)
            current, size = [], 0
        current.append(row)
        size += length
    return [*out, current] if current else out


def _cut(text: str | None) -> str | None:
    return text if text is None or len(text) <= REPLY_CHARS else text[:REPLY_CHARS] + " [...]"
