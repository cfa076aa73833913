"""The turn journal: a replied turn is on disk before its post-turn writes start, until every layer has it.

One synced row per turn (`$THOTH_HOME/journal.db`, SQLite with `synchronous=FULL`) holds the
turn, the reply, the session it belongs to and the plugins whose `post_turn_write` has not yet
succeeded. Each plugin that succeeds is struck off; the row goes when none is left. A process
killed after the reply was shown leaves the row behind, and the next runtime replays it to the
plugins still listed (`thoth_core.writes.TurnWriter.recover`). A plugin that fails stays listed: the next start
retries it, and the user is told the turn is not saved yet.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .storage import connect, migrate
from .types import Reply, Session, Turn, Usage

RESERVE_BYTES = 256 << 10  # room for dozens of turns on a full disk

logger = logging.getLogger(__name__)

MIGRATIONS = [
    """
    CREATE TABLE pending (
        turn_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        peer TEXT NOT NULL,
        thread TEXT NOT NULL,
        session_id TEXT NOT NULL,
        session_started REAL NOT NULL,
        turn TEXT NOT NULL,
        reply TEXT NOT NULL,
        plugins TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        error TEXT
    );
    CREATE INDEX pending_owner ON pending (workspace, peer, thread);
    """,
    "ALTER TABLE pending ADD COLUMN writer_pid INTEGER; ALTER TABLE pending ADD COLUMN journaled_at REAL",
]
IN_FLIGHT_SECONDS = 3600  # a row of another live process younger than this is its own, still being written


@dataclass
class Entry:
    """A journaled turn and the plugins that still have to write it."""

    turn: Turn
    reply: Reply
    session_id: str
    session_started: float
    plugins: list[str]
    attempts: int = 0
    error: str | None = None

    def session(self, runtime: Any) -> Session:
        """A stand-in for the turn's session, holding just this turn, for replaying its writes."""
        session = Session(
            self.turn.workspace,
            self.turn.peer,
            self.turn.thread,
            id=self.session_id,
            started_at=self.session_started,
            home=runtime.home,
            runtime=runtime,
            agent=self.turn.agent,  # the agent that answered it, whichever agent's process replays it
        )
        session.record(self.turn, self.reply)
        session.last_active = self.reply.finished_at
        session.scratch["thoth.replay"] = True
        return session


class TurnJournal:
    """The journal file of one Thoth home; safe to use from worker threads.

    It keeps room for turns on a full disk: the file holds `RESERVE_BYTES` of free pages and its
    rollback journal stays allocated (`journal_mode=PERSIST`), so an append reuses space the file
    already has instead of growing it (a WAL would need new space after each checkpoint).
    """

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = connect(path, synchronous="FULL", journal_mode="PERSIST")
        migrate(self._db, MIGRATIONS)
        try:
            self._reserve()
        except sqlite3.OperationalError as exc:  # a full disk now: keep what room there is
            logger.warning("%s: no room to reserve for the turn journal: %s", path, exc)

    def _reserve(self, *, always: bool = False) -> None:
        """Grow the file's free pages (and the rollback journal) to the reserve; reused by every turn."""
        page_size = self._db.execute("PRAGMA page_size").fetchone()[0]
        free = self._db.execute("PRAGMA freelist_count").fetchone()[0] * page_size
        if always or free < RESERVE_BYTES // 2:
            self._db.execute("CREATE TABLE IF NOT EXISTS reserve (filler BLOB)")
            self._db.execute("INSERT INTO reserve VALUES (zeroblob(?))", (RESERVE_BYTES,))
            self._db.execute("DELETE FROM reserve")

    def append(self, turn: Turn, reply: Reply, session: Session, plugins: list[str]) -> None:
        """Write the turn and its reply, synced, with the plugins that must still write it."""
        row = (
            turn.id,
            turn.workspace,
            turn.peer,
            turn.thread,
            session.id,
            session.started_at,
            json.dumps(asdict(turn), default=str),
            json.dumps(asdict(reply)),
            json.dumps(plugins),
            os.getpid(),
            time.time(),
        )
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO pending VALUES (?,?,?,?,?,?,?,?,?,0,NULL,?,?)", row)

    def settle(self, turn_id: str, *, done: list[str], failed: dict[str, str]) -> None:
        """Strike off the plugins that wrote the turn; count an attempt for those that failed."""
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")  # another process may settle the same turn (a replay)
            try:
                found = self._db.execute("SELECT plugins FROM pending WHERE turn_id=?", (turn_id,)).fetchone()
                left = [p for p in json.loads(found[0]) if p not in done] if found else []
                if found and not left:
                    self._db.execute("DELETE FROM pending WHERE turn_id=?", (turn_id,))
                elif found:
                    error = "; ".join(f"{plugin}: {message}" for plugin, message in failed.items()) or None
                    self._db.execute(
                        "UPDATE pending SET plugins=?, attempts=attempts+?, error=coalesce(?, error) WHERE turn_id=?",
                        (json.dumps(left), 1 if failed else 0, error, turn_id),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def pending(self, *, others_in_flight: bool = True) -> list[Entry]:
        """Every turn some plugin has not written yet, oldest first.

        With `others_in_flight=False`, leave out the turns another live process journaled within the
        last hour: that process is still writing them (a chat open beside a `thoth ask`).
        """
        with self._lock:
            rows = self._db.execute(
                "SELECT turn, reply, session_id, session_started, plugins, attempts, error, writer_pid, journaled_at "
                "FROM pending ORDER BY rowid"
            ).fetchall()
        now = time.time()
        return [
            _entry(*row[:7])
            for row in rows
            if others_in_flight or not (_alive_other(row[7]) and now - (row[8] or 0) < IN_FLIGHT_SECONDS)
        ]

    def forget(self, *, workspace: str, peer: str, thread: str | None) -> int:
        """Delete a peer's journaled turns (or one thread's) and scrub the file; returns how many."""
        with self._lock:
            deleted = self._db.execute(
                "DELETE FROM pending WHERE workspace=? AND peer=? AND (? IS NULL OR thread=?)",
                (workspace, peer, thread, thread),
            ).rowcount
            # the persisted rollback journal still holds old images of the pages: drop it, then make room again
            self._db.execute("PRAGMA journal_mode=DELETE")
            self._db.execute("PRAGMA journal_mode=PERSIST")
            self._reserve(always=True)
        return deleted

    def close(self) -> None:
        """Close the file."""
        with self._lock:
            self._db.close()


def _alive_other(pid: int | None) -> bool:
    """True when pid is another process that is still running."""
    if not pid or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _entry(turn: str, reply: str, session_id: str, started: float, plugins: str, attempts: int, error: str | None) -> Entry:
    reply_data = json.loads(reply)
    reply_data["usage"] = Usage(**reply_data.get("usage") or {})
    return Entry(Turn(**json.loads(turn)), Reply(**reply_data), session_id, started, json.loads(plugins), attempts, error)
