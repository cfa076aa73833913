"""Post-turn writes: journaled first, run in the background, replayed after a crash, reported when they fail.

The runtime hands each replied turn to its `TurnWriter`. The turn is synced to the journal
(`journal.py`), then every `post_turn_write` runs in the background; the plugins that succeed
are struck off. A plugin that fails, or is still writing when the process exits
(`[thoth] exit_deadline`), leaves the turn journaled: it is reported (`turn_unsaved`) and
written again at the next start, when the first session opens.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ._calls import call_each
from .journal import TurnJournal
from .types import Reply, Session, Turn

logger = logging.getLogger(__name__)


def unsaved_message(failed: dict[str, str], *, where: str = "") -> str:
    """What a person is told when layers could not save a replied turn (`failed`: plugin -> error)."""
    layers = ", ".join(f"{plugin} ({error})" for plugin, error in failed.items()) or "a layer"
    if "journal" in failed:
        return f"Not saved{where}: {layers}; the turn could not be journaled either and is lost."
    return f"Not saved yet{where}: {layers}; kept in the journal and retried at the next start."


class TurnWriter:
    """The journaled post-turn writes of one runtime."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.unsaved: list[dict[str, Any]] = []  # replied turns some layer could not write (still journaled)
        self.running: dict[asyncio.Task[Any], Turn] = {}
        self._journal: TurnJournal | None = None

    @property
    def journal(self) -> TurnJournal:
        """The turn journal of the runtime's home (or of the shared store), opened on first use."""
        if self._journal is None:
            self._journal = TurnJournal(self.runtime.home / "journal.db", self.runtime.config)
        return self._journal

    def writers(self) -> list[str]:
        """The plugins that implement `post_turn_write`."""
        return [impl.plugin_name for impl in self.runtime.pm.hook.post_turn_write.get_hookimpls()]

    async def start(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Journal the replied turn (synced), then write it in the background."""
        writers = self.writers()
        unjournaled = None
        try:
            await asyncio.to_thread(self.journal.append, turn, reply, session, writers)
        except Exception as exc:  # noqa: BLE001 - the reply stands; a loss is reported, not raised
            logger.error("turn %s: the journal could not keep it: %s: %s", turn.id, type(exc).__name__, exc)
            unjournaled = f"{type(exc).__name__}: {exc}"
        self._background(turn, reply, session, writers, unjournaled=unjournaled)

    def _background(
        self, turn: Turn, reply: Reply, session: Session, writers: list[str], *, unjournaled: str | None = None
    ) -> asyncio.Task[Any]:
        task = self.runtime.background(self.write(turn, reply, session, writers, unjournaled=unjournaled))
        assert task is not None, "post-turn writes start on the runtime's event loop"
        self.running[task] = turn
        task.add_done_callback(lambda done: self.running.pop(done, None))
        return task

    async def write(
        self, turn: Turn, reply: Reply, session: Session, writers: list[str], *, unjournaled: str | None = None
    ) -> None:
        """Run these plugins' post-turn writes and strike off in the journal those that succeeded.

        A listed plugin that is not loaded now (disabled, filtered) stays listed for a later start.
        `unjournaled` is the journal's error when it could not keep the turn: reported only if a write fails.
        """
        runtime = self.runtime
        kwargs = {"turn": turn, "reply": reply, "session": session}
        outcomes = await call_each(
            runtime.pm, "post_turn_write", kwargs, deadline_for=runtime.background_deadline, only=set(writers)
        )
        done = [plugin for plugin, _, call in outcomes if call.status == "ok"]
        failed = {plugin: str(call.error) for plugin, _, call in outcomes if call.status != "ok"}
        waiting = sorted(set(writers) - {plugin for plugin, _, _ in outcomes})
        if waiting:
            logger.info("turn %s: kept in the journal for %s, not loaded now", turn.id, ", ".join(waiting))
        if unjournaled is None:
            try:
                await asyncio.to_thread(self.journal.settle, turn.id, done=done, failed=failed)
            except Exception as exc:  # noqa: BLE001 - the writes happened; a later replay repeats them, idempotently
                logger.error("turn %s: the journal could not be updated: %s", turn.id, exc)
        if failed:
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
        """
        try:
            entries = await asyncio.to_thread(self.journal.pending, others_in_flight=False)
        except Exception as exc:  # noqa: BLE001
            logger.error("the turn journal cannot be read: %s", exc)
            return 0
        tasks = []
        for entry in entries:
            logger.info("turn %s: replaying its writes to %s", entry.turn.id, ", ".join(entry.plugins))
            tasks.append(self._background(entry.turn, entry.reply, entry.session(self.runtime), entry.plugins))
        if tasks:
            await asyncio.wait(tasks, timeout=float(self.runtime.config.get("thoth.deadline")))
        return len(entries)

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
