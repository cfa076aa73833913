"""The shared turn journal with a local one beside it, for the turns it cannot take while PostgreSQL is down.

With `[storage] url`, turns are journaled in the shared PostgreSQL (`journal.py`). When the server
does not answer, `append` puts the turn in the home's SQLite journal instead (`journal.db`, made
on first use), at once: the circuit of `thoth_core.database` fails the shared append without
waiting. `settle` goes where the turn is, and `pending` lists both, so the runtime's replay
(`TurnWriter.recover`) writes the local turns to the layers like any other and clears them as
they are written. `when_back` callbacks run each time the server answers again, so the same
process replays what waited, without a new start. A shared journal that could not even be opened
(the server was down when it was first needed) is opened then.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Config
from .database import StoreDown, storage_url, when_back
from .journal import Entry, TurnJournal
from .types import Reply, Session, Turn

logger = logging.getLogger(__name__)


def open_journal(path: Path, config: Any = None) -> TurnJournal | FallbackJournal:
    """The turn journal of a home: SQLite at `path`, or the shared one with a local fallback at `path`."""
    if config is None or storage_url(config) is None:
        return TurnJournal(path, config)
    return FallbackJournal(path, config)


class FallbackJournal:
    """The shared journal, and the home's SQLite journal for the turns appended while the server was down."""

    shared = True

    def __init__(self, path: Path, config: Any) -> None:
        self.path = path
        self.config = config
        self._lock = threading.Lock()
        self._local: TurnJournal | None = None
        self._local_turns: set[str] = set()  # turns journaled locally by this process, not yet settled
        self._callbacks: list[Callable[[], object]] = []
        self._remote: TurnJournal | None = None
        try:
            self._remote = TurnJournal(path, config)
        except Exception as exc:  # noqa: BLE001 - the server is down at the first turn: the local journal keeps them
            quiet = isinstance(exc, StoreDown)  # the circuit has said so, once
            (logger.info if quiet else logger.warning)(
                "turn journal: the shared journal cannot be opened (%s); journaling in %s", exc, path
            )
        self._unsubscribe = when_back(config, self._back)

    @property
    def remote(self) -> TurnJournal | None:
        """The shared journal, if it could be opened."""
        return self._remote

    @property
    def writer(self) -> str:
        """This process's writer id in the shared journal ('' if it could not be opened yet)."""
        return self._remote.writer if self._remote is not None else ""

    @property
    def writer_lock_held(self) -> bool:
        """Whether this process holds its writer lock in the shared journal now."""
        return self._remote is not None and self._remote.writer_lock_held

    def writer_alive(self, writer: str) -> bool:
        """Whether the shared journal's writer `writer` still runs."""
        if self._remote is None:
            return writer == ""
        return self._remote.writer_alive(writer)

    def local(self) -> TurnJournal:
        """The home's SQLite journal, opened (and made) on first use."""
        with self._lock:
            if self._local is None:
                self._local = TurnJournal(self.path, Config(data={}))
            return self._local

    def when_back(self, callback: Callable[[], object]) -> None:
        """Call `callback` (from another thread) each time the server answers again, once the shared journal is open."""
        self._callbacks.append(callback)

    def _back(self) -> None:
        if self._remote is None:
            try:
                self._remote = TurnJournal(self.path, self.config)
            except Exception as exc:  # noqa: BLE001 - the next recovery tries again
                logger.warning("turn journal: the shared journal still cannot be opened: %s", exc)
                return
        try:
            self._drop_shared_copies()
        except Exception as exc:  # noqa: BLE001 - `pending` leaves them out meanwhile
            logger.warning("turn journal: could not strike off the shared copies of local turns: %s", exc)
        for callback in list(self._callbacks):
            callback()

    def append(self, turn: Turn, reply: Reply, session: Session, plugins: list[str]) -> None:
        """Journal the turn in the shared journal, or, if the server does not answer, in the local one."""
        if self._remote is not None and turn.id not in self._local_turns:
            try:
                self._remote.append(turn, reply, session, plugins)
                return
            except Exception as exc:  # noqa: BLE001 - any failure of the shared store: the local journal keeps it
                logger.warning(
                    "turn %s: the shared journal cannot take it (%s); journaled in %s", turn.id, exc, self.path
                )
        self.local().append(turn, reply, session, plugins)
        self._local_turns.add(turn.id)

    def _holding(self, turn_id: str) -> TurnJournal | None:
        """The journal that holds this turn: the local one if it does, else the shared one."""
        if self._has_local() and turn_id in {entry.turn.id for entry in self.local().pending()}:
            return self.local()
        self._local_turns.discard(turn_id)
        return self._remote

    def progress(self, turn_id: str, reply: Reply) -> bool:
        """Replace a journaled turn's reply wherever it is journaled; False if no row."""
        journal = self._holding(turn_id)
        return journal is not None and bool(journal.progress(turn_id, reply))

    def settle(self, turn_id: str, *, done: list[str], failed: dict[str, str]) -> None:
        """Strike off the plugins that wrote the turn, in the journal that holds it."""
        journal = self._holding(turn_id)
        if journal is None:
            raise RuntimeError("the shared journal is not open and the turn is not in the local one")
        journal.settle(turn_id, done=done, failed=failed)

    def pending(self, *, others_in_flight: bool = True) -> list[Entry]:
        """The local journal's turns, then the shared journal's (left out, with a warning, if it does not answer).

        A turn in both (accepted in the shared journal, then journaled locally once the server went away)
        is the local one's: the shared row is struck off when the server is back.
        """
        local = self.local().pending() if self._has_local() else []
        entries = self.local().pending(others_in_flight=others_in_flight) if local else []
        if self._remote is not None:
            try:
                shared = self._remote.pending(others_in_flight=others_in_flight)
            except Exception as exc:  # noqa: BLE001 - its turns wait for the server, they are not lost
                logger.warning("turn journal: the shared journal cannot be read now: %s", exc)
                shared = []
            here = {entry.turn.id for entry in local}
            entries += [entry for entry in shared if entry.turn.id not in here]
        return entries

    def _drop_shared_copies(self) -> None:
        """Strike off the shared rows of turns the local journal holds (they were moved there in an outage)."""
        if self._remote is None or not self._has_local():
            return
        here = {entry.turn.id for entry in self.local().pending()}
        for entry in self._remote.pending(others_in_flight=False):
            if entry.turn.id in here:
                self._remote.settle(entry.turn.id, done=entry.plugins, failed={})

    def _has_local(self) -> bool:
        return self._local is not None or self.path.exists()

    def forget(self, *, workspace: str, peer: str, thread: str | None) -> int:
        """Delete a peer's journaled turns (or one thread's) in both journals; returns how many."""
        deleted = self.local().forget(workspace=workspace, peer=peer, thread=thread) if self._has_local() else 0
        if self._remote is None:
            raise RuntimeError("the shared journal cannot be opened: its turns of this peer are not deleted yet")
        return deleted + self._remote.forget(workspace=workspace, peer=peer, thread=thread)

    def close(self) -> None:
        """Close both journals and give up the writer lock."""
        if self._unsubscribe is not None:
            self._unsubscribe()
        for journal in (self._remote, self._local):
            if journal is not None:
                journal.close()
        self._remote = self._local = None


__all__ = ["FallbackJournal", "open_journal"]
