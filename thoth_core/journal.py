"""The turn journal: a user's message is on disk from the moment it is accepted until every layer has it.

One synced row per turn (`$THOTH_HOME/journal.db`, SQLite with `synchronous=FULL`; or the
`thoth_journal` schema of the shared PostgreSQL with `[storage] url`) holds the turn, the reply,
the session it belongs to and the plugins whose `post_turn_write` has not yet succeeded. The row
is written before the model is called, its reply then holds what was shown so far, marked cut
short (`progress`), until the whole reply replaces it. Each plugin that succeeds is struck off;
the row goes when none is left. A process killed at any point after the message was accepted
leaves the row behind, and the next runtime replays it to the plugins still listed
(`thoth_core.writes.TurnWriter.recover`): a mid-stream kill keeps the message and the reply as far
as it was shown. A plugin that fails stays listed: it is retried, and the user is told the turn
is not saved yet.

Whose row is it? With SQLite, the writer's pid (one host). With PostgreSQL, each journal has a
writer id and holds an advisory lock named after it for its whole life: a row belongs to a live
writer iff that lock cannot be taken, so a worker on any host replays a dead worker's turns,
never a live one's, and claims them (one UPDATE) so two replaying workers never both take a row.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Config
from .database import RESTART_GRACE_SECONDS, HeldLock, open_database, worker_id
from .processes import pid_alive
from .types import Reply, Session, Turn, Usage

if TYPE_CHECKING:
    from .runtime import Runtime

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
POSTGRES = [
    """
    CREATE TABLE pending (
        seq BIGSERIAL UNIQUE,
        turn_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        peer TEXT NOT NULL,
        thread TEXT NOT NULL,
        session_id TEXT NOT NULL,
        session_started DOUBLE PRECISION NOT NULL,
        turn TEXT NOT NULL,
        reply TEXT NOT NULL,
        plugins TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        error TEXT,
        writer_pid INTEGER,
        journaled_at DOUBLE PRECISION,
        writer TEXT NOT NULL
    );
    CREATE INDEX pending_owner ON pending (workspace, peer, thread);
    CREATE INDEX pending_writer ON pending (writer);
    """
]
ENTRY_COLUMNS = "turn, reply, session_id, session_started, plugins, attempts, error"
CLOSED = "closed:"  # a writer id with this prefix: the writer closed, its turns are anyone's
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

    def session(self, runtime: Runtime) -> Session:
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

    def record(self) -> dict[str, Any]:
        """The entry as JSON-able data (as a journal row holds it), for a file outside the journal (`held.py`)."""
        return {
            "turn": json.loads(json.dumps(asdict(self.turn), default=str)),
            "reply": asdict(self.reply),
            "session_id": self.session_id,
            "session_started": self.session_started,
            "plugins": list(self.plugins),
        }

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Entry:
        """The entry `record` made (raises KeyError or TypeError when it is not one)."""
        reply = dict(record["reply"])
        reply["usage"] = Usage(**reply.get("usage") or {})
        return cls(
            Turn(**record["turn"]),
            Reply(**reply),
            str(record["session_id"]),
            float(record["session_started"]),
            [str(plugin) for plugin in record["plugins"]],
        )


class TurnJournal:
    """The turn journal of one Thoth home (or of the shared store); safe to use from worker threads.

    With SQLite it keeps room for turns on a full disk: the file holds `RESERVE_BYTES` of free
    pages and its rollback journal stays allocated (`journal_mode=PERSIST`), so an append reuses
    space the file already has instead of growing it (a WAL would need new space after each
    checkpoint). With PostgreSQL it holds its writer lock (`writer:<id>`) until `close`.
    """

    def __init__(self, path: Path, config: Any = None) -> None:
        self._lock = threading.Lock()
        self._db = open_database(
            config if config is not None else Config(data={}),
            "journal",
            path=path,
            migrations=MIGRATIONS,
            postgres=POSTGRES,
            synchronous="FULL",
            journal_mode="PERSIST",
        )
        self.shared = self._db.dialect == "postgres"
        self.writer = worker_id()  # host:pid:random, so a writer of this host is known dead by its pid
        self._writer_lock: HeldLock | None = None  # the writer lock (PostgreSQL)
        if self.shared:
            self._hold_writer_lock()
            return
        try:
            self._reserve()
        except sqlite3.OperationalError as exc:  # a full disk now: keep what room there is
            logger.warning("%s: no room to reserve for the turn journal: %s", path, exc)

    def _writer_key(self, writer: str) -> str:
        """The advisory lock a writer holds while it lives (named as `Database.lock` names its keys)."""
        return f"{getattr(self._db, 'schema', 'thoth_journal')}:writer:{writer}"

    def _hold_writer_lock(self) -> None:
        """Take this writer's lock, held until `close` (or the process's death) and re-taken after a server restart."""
        try:
            self._writer_lock = HeldLock(self._db.url, self._writer_key(self.writer))  # type: ignore[attr-defined]
        except BaseException:
            self._db.close()
            raise

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
        row: tuple[Any, ...] = (
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
        columns = "turn_id, workspace, peer, thread, session_id, session_started, turn, reply, plugins, "
        columns += "writer_pid, journaled_at"
        names = columns.split(", ")
        if self.shared:
            row, names = (*row, self.writer), [*names, "writer"]
        update = ", ".join(f"{name}=excluded.{name}" for name in names[1:])
        with self._lock:
            self._db.execute(
                f"INSERT INTO pending ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)}) "
                f"ON CONFLICT (turn_id) DO UPDATE SET {update}, attempts=0, error=NULL",
                row,
            )

    def progress(self, turn_id: str, reply: Reply) -> bool:
        """Replace a journaled turn's reply (a streaming reply as far as it was shown), synced; False if no row."""
        with self._lock:
            cursor = self._db.execute(
                "UPDATE pending SET reply=?, journaled_at=? WHERE turn_id=?",
                (json.dumps(asdict(reply)), time.time(), turn_id),
            )
        return bool(cursor.rowcount)

    def settle(self, turn_id: str, *, done: list[str], failed: dict[str, str]) -> None:
        """Strike off the plugins that wrote the turn; count an attempt for those that failed."""
        lock_row = " FOR UPDATE" if self.shared else ""  # SQLite's transaction takes the write lock at once
        with self._lock, self._db.transaction() as tx:  # another process may settle the same turn (a replay)
            found = tx.execute(f"SELECT plugins FROM pending WHERE turn_id=?{lock_row}", (turn_id,)).fetchone()
            left = [p for p in json.loads(found[0]) if p not in done] if found else []
            if found and not left:
                tx.execute("DELETE FROM pending WHERE turn_id=?", (turn_id,))
            elif found:
                error = "; ".join(f"{plugin}: {message}" for plugin, message in failed.items()) or None
                tx.execute(
                    "UPDATE pending SET plugins=?, attempts=attempts+?, error=coalesce(?, error) WHERE turn_id=?",
                    (json.dumps(left), 1 if failed else 0, error, turn_id),
                )

    def pending(self, *, others_in_flight: bool = True) -> list[Entry]:
        """Every turn some plugin has not written yet, oldest first.

        With `others_in_flight=False`, leave out the turns another live process is still writing:
        with SQLite, those it journaled within the last hour (a chat open beside a `thoth ask`);
        with PostgreSQL, every turn of a live writer, and the turns of dead writers are claimed
        (made this writer's) first, so of workers replaying at once each turn goes to one.
        """
        if self.shared:
            if not others_in_flight:
                self._claim_dead_writers()
            with self._lock:
                where = "" if others_in_flight else " WHERE writer=?"
                params = () if others_in_flight else (self.writer,)
                rows = self._db.execute(f"SELECT {ENTRY_COLUMNS} FROM pending{where} ORDER BY seq", params).fetchall()
            return [_entry(*row) for row in rows]
        with self._lock:
            rows = self._db.execute(
                f"SELECT {ENTRY_COLUMNS}, writer_pid, journaled_at FROM pending ORDER BY rowid"
            ).fetchall()
        now = time.time()
        return [
            _entry(*row[:7])
            for row in rows
            if others_in_flight or not (_alive_other(row[7]) and now - (row[8] or 0) < IN_FLIGHT_SECONDS)
        ]

    def writer_alive(self, writer: str) -> bool:
        """Whether the journal whose writer id this is still runs (holds its lock), on any host."""
        if writer == self.writer:
            return True
        key = self._writer_key(writer)
        with self._db.transaction() as tx:  # a transaction-level try: released when it ends
            taken = tx.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0))", (key,)).fetchone()[0]
        return not taken

    def _claim_dead_writers(self) -> int:
        """Make the turns of writers that closed or died this writer's; returns how many (each taken by one claimer).

        A free lock means a dead writer only once the server has been up `RESTART_GRACE_SECONDS`:
        a restart frees every writer's lock, and the live ones take theirs again within that time.
        A writer that closed left its turns to anyone (`close`), at once.
        """
        sql = "SELECT DISTINCT writer FROM pending WHERE writer<>?"
        with self._lock:
            writers = [row[0] for row in self._db.execute(sql, (self.writer,)).fetchall()]
        released = [writer for writer in writers if writer.startswith(CLOSED)]
        others = [writer for writer in writers if not writer.startswith(CLOSED)]
        if others and self._db.uptime() < RESTART_GRACE_SECONDS:  # type: ignore[attr-defined]
            logger.info("turn journal: the server restarted moments ago; only writers known dead lose their turns")
            others = [writer for writer in others if _dead_here(writer)]
        claimed = 0
        for writer in released + [writer for writer in others if not self.writer_alive(writer)]:
            with self._lock:  # of two claimers, the second finds the rows no longer the dead writer's
                taken = self._db.execute(
                    "UPDATE pending SET writer=?, writer_pid=? WHERE writer=? RETURNING turn_id",
                    (self.writer, os.getpid(), writer),
                ).fetchall()
            if taken:
                gone = "which closed" if writer.startswith(CLOSED) else "which is gone"
                logger.info("turn journal: took over %d turn(s) of writer %s, %s", len(taken), writer, gone)
            claimed += len(taken)
        return claimed

    def forget(self, *, workspace: str, peer: str, thread: str | None) -> int:
        """Delete a peer's journaled turns (or one thread's) and scrub what they left; returns how many."""
        with self._lock:
            deleted = self._db.execute(
                "DELETE FROM pending WHERE workspace=? AND peer=? AND (CAST(? AS TEXT) IS NULL OR thread=?)",
                (workspace, peer, thread, thread),
            ).rowcount
            if self.shared:
                self._db.scrub(tables=["pending"])
                return deleted
            # the persisted rollback journal still holds old images of the pages: drop it, then make room again
            self._db.execute("PRAGMA journal_mode=DELETE")
            self._db.execute("PRAGMA journal_mode=PERSIST")
            self._reserve(always=True)
        return deleted

    def close(self) -> None:
        """Leave this writer's turns to the next replay, give up the writer lock and close the store."""
        with self._lock:
            if self._writer_lock is not None:
                held, self._writer_lock = self._writer_lock, None
                try:  # whoever replays next takes them at once, with no wait for a restart's grace
                    self._db.execute("UPDATE pending SET writer=? WHERE writer=?", (CLOSED + self.writer, self.writer))
                except self._db.errors as exc:  # the server is away: they are taken once the grace is over
                    logger.info("turn journal: could not leave writer %s's turns to others: %s", self.writer, exc)
                held.release()  # at once, not when the server notices the connection closed: a replay may follow
            self._db.close()

    @property
    def writer_lock_held(self) -> bool:
        """Whether this journal holds its writer lock now (always True on SQLite, which has none)."""
        return self._writer_lock is None or self._writer_lock.held


def _dead_here(writer: str) -> bool:
    """Whether a writer id (`worker_id`) names a process of this host that no longer runs."""
    host, _, rest = writer.partition(":")
    pid = rest.partition(":")[0]
    return host == socket.gethostname() and pid.isdigit() and not pid_alive(int(pid))


def _alive_other(pid: int | None) -> bool:
    """True when pid is another process that is still running."""
    if not pid or pid == os.getpid():
        return False
    return pid_alive(pid)


def _entry(
    turn: str, reply: str, session_id: str, started: float, plugins: str, attempts: int, error: str | None
) -> Entry:
    record = {"turn": json.loads(turn), "reply": json.loads(reply), "session_id": session_id}
    entry = Entry.from_record(record | {"session_started": started, "plugins": json.loads(plugins)})
    entry.attempts, entry.error = attempts, error
    return entry
