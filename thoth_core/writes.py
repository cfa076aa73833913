"""A turn's writes: journaled when accepted, as the reply streams and once it is whole; retried until kept.

The runtime hands each turn to its `TurnWriter`. The user's message is synced to the journal
(`journal.py`) before the model is called (`accept`); as the reply streams, each batch of text is
synced before it is shown (`streaming.StreamedReply`, at most every `PROGRESS_EVERY` s), kept as
a reply cut short; the whole reply then replaces it (`start`) and every `post_turn_write` runs in
the background; the plugins that succeed are struck off. A process killed at any point after the
message was accepted leaves the row, which the next start replays (`recover`).

What fails is retried by this process, in the background with a growing pause and at its next
turn (`owed`): a layer that failed gets the turn again (`RETRY_TRIES` times, then it waits for the
next start), and a turn the journal itself could not keep (a full disk, a read-only folder) is
held in memory and retried until it can be journaled. At exit (`at_exit`) a turn memory still
holds is kept outside the home (`held.py`), and the next start of the home journals and replays
it; what is not written everywhere is said in one line, and a turn that could not be kept
anywhere says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import _calls, held
from .fallback import FallbackJournal, open_journal
from .journal import Entry, TurnJournal
from .streaming import PROGRESS_EVERY, SYNC_WAIT, StreamedReply
from .types import Reply, Session, Turn

if TYPE_CHECKING:
    from .runtime import Runtime

logger = logging.getLogger(__name__)

RETRY_FIRST = 1.0  # seconds before the first retry of what failed; doubled after each retry that saved nothing
RETRY_MAX = 60.0
RETRY_TRIES = 10  # a journaled turn still failing after this many retries (~5 min) is left to the next start


def unsaved_message(
    failed: dict[str, str], *, where: str = "", kept_at: Path | None = None, lost: str | None = None
) -> str:
    """What a person is told when layers could not save a replied turn (`failed`: plugin -> error).

    When the journal could not keep it either: `kept_at` is the file outside the home that holds
    it since the process ended, `lost` why no such file could be written; neither, while it runs.
    """
    layers = ", ".join(f"{plugin} ({error})" for plugin, error in failed.items()) or "a layer"
    if "journal" not in failed:
        return f"Not saved yet{where}: {layers}; kept in the journal and retried at the next start."
    if kept_at is not None:
        return (
            f"Not saved{where}: {layers}; the journal could not keep it either: kept in {kept_at} "
            "until the home can be written; the next start there journals and writes it."
        )
    if lost is not None:
        return f"Not saved{where}: {layers}; nor could it be kept outside the home ({lost}): lost."
    return (
        f"Not saved{where}: {layers}; the journal could not keep it either: held in memory and "
        "retried while this process runs, kept outside the home if it ends first."
    )


@dataclass
class Owed:
    """A turn some layer (or the journal) could not write yet: this process retries it."""

    turn: Turn
    reply: Reply
    session: Session
    plugins: list[str]
    unjournaled: str | None = None  # the journal's error while only memory holds the turn
    tries: int = 0  # retries that failed


class TurnWriter:
    """The journaled writes of one runtime's turns, and the retries of those that failed."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.unsaved: list[dict[str, Any]] = []  # replied turns some layer could not write (yet)
        self.running: dict[asyncio.Task[Any], Turn] = {}
        self.accepted: set[str] = set()  # turns journaled on acceptance whose reply is not whole yet (in flight)
        self.owed: dict[str, Owed] = {}  # turn id -> what this process retries
        self._journal: TurnJournal | FallbackJournal | None = None
        self._watching = False  # replays when the shared store is back (`replay_when_back`)
        self._retrying: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._progress_failed: set[str] = set()
        self._closing = False
        self.kept_at: Path | None = None  # the file outside the home that kept turns at exit (`held.py`)
        self.lost: str | None = None  # why turns only memory held could not be kept anywhere at exit

    @property
    def journal(self) -> TurnJournal | FallbackJournal:
        """The turn journal of the home (or of the shared store), opened on first use (raises if it cannot be)."""
        if self._journal is None:
            self._journal = open_journal(self.runtime.home / "journal.db", self.runtime.config)
        return self._journal

    def writers(self) -> list[str]:
        """The plugins that implement `post_turn_write`."""
        return self.runtime.pm.implementers("post_turn_write")

    async def accept(self, turn: Turn, session: Session) -> tuple[Turn, bool]:
        """Journal a user's message before the model is called (synced); the turn as kept, and whether it is kept."""
        self.accepted.add(turn.id)

        def keep() -> tuple[Turn, bool]:
            kept = replace(turn, text=self.runtime.redactor.redact(turn.text), agent=session.agent)
            try:
                self.journal.append(kept, Reply.cut(""), session, self.writers())
            except Exception as exc:  # noqa: BLE001 - the turn goes on; `start` holds it in memory if need be
                logger.warning(
                    "turn %s: the journal could not keep the message: %s: %s", turn.id, type(exc).__name__, exc
                )
                return kept, False
            return kept, True

        return await asyncio.to_thread(keep)

    def stream(self, turn: Turn, model: str, show: Callable[[str], Any] | None, *, journaled: bool) -> StreamedReply:
        """The reply of an accepted turn, journaled as it is shown."""
        return StreamedReply(self.progress, turn, model, show, journaled=journaled)

    async def progress(self, turn: Turn, reply: Reply) -> None:
        """Sync the reply shown so far (redacted) into the turn's row; a failure is logged, the stream goes on."""

        def sync() -> None:
            self.journal.progress(turn.id, replace(reply, text=self.runtime.redactor.redact(reply.text)))

        try:
            await asyncio.to_thread(sync)
        except Exception as exc:  # noqa: BLE001 - the whole reply is journaled (or held) at its end
            if turn.id not in self._progress_failed:
                self._progress_failed.add(turn.id)
                logger.warning("turn %s: the journal could not keep the reply so far: %s", turn.id, exc)

    async def start(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Journal the replied turn (synced, over its accepted row), then write it in the background."""
        writers = self.writers()
        unjournaled = None
        try:
            await asyncio.to_thread(self.journal.append, turn, reply, session, writers)
        except Exception as exc:  # noqa: BLE001 - the reply stands; the turn is held in memory and retried
            logger.error(
                "turn %s: the journal could not keep it (held in memory): %s: %s", turn.id, type(exc).__name__, exc
            )
            unjournaled = f"{type(exc).__name__}: {exc}"
        finally:
            self.accepted.discard(turn.id)
            self._progress_failed.discard(turn.id)
        if unjournaled is not None:  # owed from now on: writes abandoned at exit must not lose it
            self.owed[turn.id] = Owed(turn, reply, session, writers, unjournaled)
        self._background(turn, reply, session, writers, unjournaled=unjournaled)

    def _background(
        self,
        turn: Turn,
        reply: Reply,
        session: Session,
        writers: list[str],
        *,
        unjournaled: str | None = None,
        retry: bool = False,
    ) -> asyncio.Task[Any]:
        work = self.write(turn, reply, session, writers, unjournaled=unjournaled, retry=retry)
        task = self.runtime.background(work)
        assert task is not None, "post-turn writes start on the runtime's event loop"
        self.running[task] = turn
        task.add_done_callback(lambda done: self.running.pop(done, None))
        return task

    async def write(
        self,
        turn: Turn,
        reply: Reply,
        session: Session,
        writers: list[str],
        *,
        unjournaled: str | None = None,
        retry: bool = False,
    ) -> None:
        """Run these plugins' post-turn writes and strike off in the journal those that succeeded.

        A listed plugin that is not loaded now (disabled, filtered) stays listed for a later start.
        `unjournaled` is the journal's error when it could not keep the turn. What failed is owed:
        retried by this process, and reported the first time (not at each `retry`).
        """
        runtime = self.runtime
        kwargs = {"turn": turn, "reply": reply, "session": session}
        outcomes = await _calls.call(runtime.pm, "post_turn_write", kwargs, deadlines=runtime, only=set(writers))
        done = [plugin for plugin, _, call in outcomes if call.status == "ok"]
        failed = {plugin: str(call.error) for plugin, _, call in outcomes if call.status != "ok"}
        waiting = sorted(set(writers) - {plugin for plugin, _, _ in outcomes})
        if waiting:
            logger.info("turn %s: kept in the journal for %s, not loaded now", turn.id, ", ".join(waiting))
        try:
            await asyncio.to_thread(self.journal.settle, turn.id, done=done, failed=failed)
        except Exception as exc:  # noqa: BLE001 - the writes happened; a later replay repeats them, idempotently
            if unjournaled is None:
                logger.error("turn %s: the journal could not be updated: %s", turn.id, exc)
        if not failed:
            self.owed.pop(turn.id, None)
            self.unsaved[:] = [entry for entry in self.unsaved if entry["turn_id"] != turn.id]
            if retry:
                logger.info("turn %s: written on retry", turn.id)
            return
        previous = self.owed.get(turn.id)
        tries = previous.tries + 1 if retry and previous is not None else 0
        if previous is not None and previous.unjournaled is None:  # journaled by a retry meanwhile
            unjournaled = None
        if unjournaled is None and tries >= RETRY_TRIES:  # only memory would hold it: never given up
            self.owed.pop(turn.id, None)
            logger.warning("turn %s: still not written after %d retries; left to the next start", turn.id, tries)
            return
        self.owed[turn.id] = Owed(turn, reply, session, [p for p in writers if p in failed], unjournaled, tries)
        self._retry_later()
        if not retry:
            self.report(turn, failed if unjournaled is None else {"journal": unjournaled, **failed})

    async def written(self, turn_id: str, *, timeout: float | None = None) -> bool:
        """Wait until the post-turn writes of this turn have finished; False if they still run after `timeout` s."""
        tasks = [task for task, turn in self.running.items() if turn.id == turn_id]
        if not tasks:
            return True
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        return not pending

    def report(self, turn: Turn, failed: dict[str, str]) -> None:
        """Tell the frontends (and `thoth ask`) that a replied turn is not saved everywhere yet."""
        entry = {"turn_id": turn.id, "peer": turn.peer, "thread": turn.thread, "failed": failed}
        self.unsaved.append(entry)
        self.runtime.notify("turn_unsaved", **entry)

    async def recover(self) -> int:
        """Replay the journal to the plugins still missing each turn; returns how many turns.

        The replayed writes get `[thoth] deadline` to finish before the first session opens; slower
        ones go on in the background (abandoned at exit like any post-turn write, staying journaled).
        This process's own turns in flight (accepted, or still writing) are left to it.
        """
        await self.take_held()
        try:
            entries = await asyncio.to_thread(self.journal.pending, others_in_flight=False)
        except Exception as exc:  # noqa: BLE001
            logger.error("the turn journal cannot be read: %s", exc)
            return 0
        self.replay_when_back()
        busy = self.accepted | {turn.id for turn in self.running.values()} | set(self.owed)
        entries = [entry for entry in entries if entry.turn.id not in busy]
        tasks = []
        for entry in entries:
            logger.info("turn %s: replaying its writes to %s", entry.turn.id, ", ".join(entry.plugins))
            tasks.append(self._background(entry.turn, entry.reply, entry.session(self.runtime), entry.plugins))
        if tasks:
            await asyncio.wait(tasks, timeout=float(self.runtime.config.get("thoth.deadline")))
        return len(entries)

    async def take_held(self) -> int:
        """Journal the turns an earlier process kept outside this home at exit (`held.py`); how many."""

        def append(entry: Entry) -> None:
            self.journal.append(entry.turn, entry.reply, entry.session(self.runtime), entry.plugins)

        try:
            taken = await asyncio.to_thread(held.take, self.runtime.home, append)
        except Exception as exc:  # noqa: BLE001 - they stay where they are, for the next start
            logger.warning("turns kept outside the home at an exit cannot be journaled yet: %s", exc)
            return 0
        if taken:
            logger.info("journaled %d turn(s) an earlier process kept outside the home", taken)
        return taken

    def replay_when_back(self) -> None:
        """Once, on the loop: each time the shared PostgreSQL answers again, retry what is owed and replay."""
        journal = self.journal
        if self._watching or not isinstance(journal, FallbackJournal):
            return
        self._watching = True
        loop = asyncio.get_running_loop()
        journal.when_back(lambda: loop.call_soon_threadsafe(self._store_back))

    def _store_back(self) -> None:
        self.retry_now()
        self.runtime.background(self.recover())

    # --- retries of what failed ---------------------------------------------------------

    def _retry_later(self) -> None:
        """Start the background retries (on the runtime's loop) unless they run or the runtime closes."""
        if not self._closing and (self._retrying is None or self._retrying.done()):
            self._wake = asyncio.Event()
            self._retrying = asyncio.ensure_future(self._retry_loop())

    def retry_now(self) -> None:
        """Retry what is owed now rather than at the next pause's end (a new turn came)."""
        if self.owed and self._wake is not None:
            self._wake.set()

    async def _retry_loop(self) -> None:
        delay = RETRY_FIRST
        while self.owed and self._wake is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            before = len(self.owed)
            try:
                left = await self.retry()
            except Exception:  # noqa: BLE001 - a retry must not end the retries
                logger.exception("retrying the unsaved turns failed")
                left = before
            delay = RETRY_FIRST if left < before else min(delay * 2, RETRY_MAX)

    async def _journal_held(self) -> None:
        """Journal the turns only memory holds, oldest first, while the journal takes them."""
        for owed in [o for o in self.owed.values() if o.unjournaled is not None]:
            try:
                await asyncio.to_thread(self.journal.append, owed.turn, owed.reply, owed.session, owed.plugins)
            except Exception as exc:  # noqa: BLE001 - still held; tried again later
                owed.unjournaled = f"{type(exc).__name__}: {exc}"
                return
            owed.unjournaled = None
            for entry in self.unsaved:  # what a person is told at exit: the journal has it now
                if entry["turn_id"] == owed.turn.id:
                    entry["failed"].pop("journal", None)
            logger.info("turn %s: journaled on retry", owed.turn.id)

    async def retry(self) -> int:
        """Journal the turns memory holds, then replay each owed turn's writes once; returns how many are still owed."""
        await self._journal_held()
        writing = {turn.id for turn in self.running.values()}
        tasks = []
        for owed in [o for o in self.owed.values() if o.turn.id not in writing]:
            session = owed.session
            if session.ended:  # its live flushes are over: write it as a replay (by turn id)
                entry = Entry(owed.turn, owed.reply, session.id, session.started_at, owed.plugins)
                session = entry.session(self.runtime)
            tasks.append(
                self._background(owed.turn, owed.reply, session, owed.plugins, unjournaled=owed.unjournaled, retry=True)
            )
        if tasks:
            await asyncio.wait(tasks)
        return len(self.owed)

    def forget(self, *, workspace: str, peer: str, thread: str | None) -> int:
        """Drop the owed turns of a peer (or one thread), so no retry brings them back, and those kept outside
        the home at an exit; how many only memory or such a file held."""
        gone = [
            turn_id
            for turn_id, owed in self.owed.items()
            if (owed.turn.workspace, owed.turn.peer) == (workspace, peer) and thread in (None, owed.turn.thread)
        ]
        in_memory = sum(self.owed.pop(turn_id).unjournaled is not None for turn_id in gone)
        try:
            kept = held.forget(self.runtime.home, workspace=workspace, peer=peer, thread=thread)
        except Exception as exc:  # noqa: BLE001 - the layers' forget goes on; this one is said loudly
            logger.error("forget %s: turns kept outside the home could not be removed: %s", peer, exc)
            kept = 0
        return in_memory + kept

    def stop_retrying(self) -> None:
        """The runtime closes: no more background retries (`at_exit` makes the last)."""
        self._closing = True
        if self._retrying is not None:
            self._retrying.cancel()
            self._retrying = self._wake = None

    async def at_exit(self) -> None:
        """Journal what memory still holds if it can, else keep it outside the home; one line for what is unsaved."""
        self.stop_retrying()
        if not self.owed:
            return
        await self._journal_held()
        only_memory = [o for o in self.owed.values() if o.unjournaled is not None]
        kept = len(self.owed) - len(only_memory)
        line = f"at exit, {len(self.owed)} turn(s) not saved in every layer: {kept} kept in the journal"
        if not only_memory:
            logger.warning("%s for the next start", line)
            return
        which = ", ".join(f"{o.turn.peer}/{o.turn.thread} turn {o.turn.id}" for o in only_memory)
        entries = [Entry(o.turn, o.reply, o.session.id, o.session.started_at, o.plugins) for o in only_memory]
        try:
            self.kept_at = await asyncio.to_thread(held.keep, self.runtime.home, entries)
        except Exception as exc:  # noqa: BLE001 - said, never silent
            self.lost = f"{type(exc).__name__}: {exc}"
            logger.error(
                "%s; %d lost: never journaled (%s), nor kept outside the home (%s): %s",
                line,
                len(only_memory),
                only_memory[-1].unjournaled,
                self.lost,
                which,
            )
            return
        for owed in only_memory:
            self.owed.pop(owed.turn.id, None)
        logger.warning(
            "%s; %d the journal could not take (%s) kept in %s until the home can be written "
            "(its next start journals them): %s",
            line,
            len(only_memory),
            only_memory[-1].unjournaled,
            self.kept_at,
            which,
        )

    def abandon(self, seconds: float) -> list[asyncio.Task[Any]]:
        """Stop waiting for the writes still running: their turns stay journaled for the next start."""
        for task, turn in list(self.running.items()):
            task.cancel()
            logger.warning("turn %s: post-turn writes unfinished after %.0f s; kept in the journal", turn.id, seconds)
            self.report(turn, {"post-turn writes": f"still running after {seconds:.0f} s"})
        return list(self.running)

    def close(self) -> None:
        """Close the journal file."""
        if self._journal is not None:
            self._journal.close()
            self._journal = None


__all__ = ["PROGRESS_EVERY", "SYNC_WAIT", "Owed", "StreamedReply", "TurnWriter", "unsaved_message"]
