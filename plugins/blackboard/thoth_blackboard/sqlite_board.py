"""The SQLite board: a log table and a table of current values in one file, shared by local processes.

One database (`$THOTH_HOME/blackboard/board.db`) holds every workspace's board, each under its
own name. Publishing appends to the log (capped at the newest `keep` rows per board) and sets
the current value in one transaction; ids come from an AUTOINCREMENT key, so they only grow and
a subscriber's cursor stays valid after a clear or an expiry. With a `ttl` the board (values and
log) expires `ttl` seconds after its last publish, like the Redis board; `ttl=None` keeps it.

Subscriptions read the log after their last id: this process's publishes wake them at once,
other processes' publishes are seen by polling every `poll` seconds. Database work runs in a
worker thread, so a busy file never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import builtins
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from thoth_core.storage import connect, migrate, scrub

from .board import Signal, check, matches

MIGRATIONS = [
    """
    CREATE TABLE log (id INTEGER PRIMARY KEY AUTOINCREMENT, board TEXT NOT NULL, key TEXT NOT NULL,
                      value TEXT NOT NULL, publisher TEXT, at REAL NOT NULL);
    CREATE INDEX log_board ON log(board, id);
    CREATE TABLE current (board TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, publisher TEXT,
                          id INTEGER NOT NULL, at REAL NOT NULL, PRIMARY KEY (board, key));
    CREATE TABLE boards (board TEXT PRIMARY KEY, last_publish REAL NOT NULL);
    """,
]
BATCH = 500


class SqliteBoard:
    """A blackboard in an SQLite file under one name (e.g. the workspace)."""

    def __init__(
        self,
        path: Path,
        *,
        name: str = "default",
        keep: int = 100_000,
        ttl: float | None = 86_400,
        poll: float = 0.1,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path, self.name, self.keep, self.ttl, self.poll, self.clock = path, name, keep, ttl, poll, clock
        self._lock = threading.Lock()
        self._db = connect(path)
        migrate(self._db, MIGRATIONS)
        self.published = 0  # bumped by this process's publishes, to wake its subscribers
        self.changed = asyncio.Condition()

    def _run(self, work: Callable[[Any], Any], *, write: bool = False) -> Any:
        """Run `work(db)`, in a write transaction when it writes; an expired board is emptied first."""
        with self._lock:
            if write:
                return self._transaction(work)
            if self._expired():  # reads take the write lock only to empty an expired board
                self._transaction(lambda _db: None)
            return work(self._db)

    def _transaction(self, work: Callable[[Any], Any]) -> Any:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            if self._expired():  # checked again under the lock: another process may have published
                self._delete()
            result = work(self._db)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return result

    async def _call(self, work: Callable[[Any], Any], *, write: bool = False) -> Any:
        return await asyncio.to_thread(self._run, work, write=write)

    def _expired(self) -> bool:
        if self.ttl is None:
            return False
        row = self._db.execute("SELECT last_publish FROM boards WHERE board = ?", (self.name,)).fetchone()
        return row is not None and self.clock() - row[0] >= self.ttl

    def _delete(self) -> int:
        count = self._db.execute("SELECT COUNT(*) FROM current WHERE board = ?", (self.name,)).fetchone()[0]
        for table in ("current", "log", "boards"):
            self._db.execute(f"DELETE FROM {table} WHERE board = ?", (self.name,))
        return int(count)

    async def publish(self, key: str, value: str, *, publisher: str | None = None) -> Signal:
        """Append to the log and set the current value in one transaction."""
        check(key, value)
        at = self.clock()

        def write(db: Any) -> int:
            signal_id = int(
                db.execute(
                    "INSERT INTO log (board, key, value, publisher, at) VALUES (?, ?, ?, ?, ?)",
                    (self.name, key, value, publisher, at),
                ).lastrowid
            )
            db.execute(
                "INSERT OR REPLACE INTO current (board, key, value, publisher, id, at) VALUES (?, ?, ?, ?, ?, ?)",
                (self.name, key, value, publisher, signal_id, at),
            )
            db.execute("INSERT OR REPLACE INTO boards (board, last_publish) VALUES (?, ?)", (self.name, at))
            if signal_id % 100 == 0:  # trim the log now and then, not on every publish
                db.execute("DELETE FROM log WHERE board = ? AND id <= ?", (self.name, signal_id - self.keep))
            return signal_id

        signal_id = await self._call(write, write=True)
        self.published += 1
        async with self.changed:
            self.changed.notify_all()
        return Signal(key, value, publisher, str(signal_id), at)

    async def get(self, key: str) -> Signal | None:
        """The current value of a key."""
        rows = await self._call(
            lambda db: db.execute(
                "SELECT key, value, publisher, id, at FROM current WHERE board = ? AND key = ?", (self.name, key)
            ).fetchall()
        )
        return _signal(rows[0]) if rows else None

    async def list(self, prefix: str = "") -> list[Signal]:
        """Current values of every key starting with prefix, sorted by key."""
        rows = await self._call(
            lambda db: db.execute(
                "SELECT key, value, publisher, id, at FROM current WHERE board = ? AND substr(key, 1, ?) = ? "
                "ORDER BY key",
                (self.name, len(prefix), prefix),
            ).fetchall()
        )
        return [_signal(row) for row in rows]

    async def subscribe(self, pattern: str, *, after: str | None = None) -> SqliteSubscription:
        """Every later signal whose key matches pattern (or after a given id)."""
        if after is None:
            last = await self._call(
                lambda db: db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'log'").fetchone()
            )
            after = str(last[0] if last else 0)
        return SqliteSubscription(self, pattern, int(after))

    async def read_after(self, cursor: int) -> builtins.list[Signal]:  # `list` here is the method
        """Up to one batch of this board's log entries with ids above cursor, in order."""
        rows = await self._call(
            lambda db: db.execute(
                "SELECT key, value, publisher, id, at FROM log WHERE board = ? AND id > ? ORDER BY id LIMIT ?",
                (self.name, cursor, BATCH),
            ).fetchall()
        )
        return [_signal(row) for row in rows]

    async def clear(self) -> int:
        """Delete the board's values and log; returns how many keys there were."""
        return int(await self._call(lambda _db: self._delete(), write=True))

    async def forget(self, publisher: str) -> dict[str, int]:
        """Delete what one publisher put on this board (current values and log), erased from the file too."""
        return await asyncio.to_thread(self._forget, publisher)

    def _forget(self, publisher: str) -> dict[str, int]:
        def delete(db: Any) -> dict[str, int]:
            where = "board = ? AND publisher = ?"
            return {
                "signals": db.execute(f"DELETE FROM current WHERE {where}", (self.name, publisher)).rowcount,
                "log entries": db.execute(f"DELETE FROM log WHERE {where}", (self.name, publisher)).rowcount,
            }

        with self._lock:
            receipt = self._transaction(delete)
            return {**receipt, **scrub(self._db)} if any(receipt.values()) else receipt

    async def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


class SqliteSubscription:
    """A cursor into an SQLite board's log; woken by local publishes, polling for other processes'."""

    def __init__(self, board: SqliteBoard, pattern: str, after: int) -> None:
        self.board, self.pattern, self.cursor = board, pattern, after
        self.closed = False

    @property
    def last_id(self) -> str:
        """The id of the last signal delivered (or skipped as not matching)."""
        return str(self.cursor)

    async def __aiter__(self) -> AsyncIterator[Signal]:  # type: ignore[override]
        while not self.closed:
            seen = self.board.published
            batch = await self.board.read_after(self.cursor)
            for signal in batch:
                self.cursor = int(signal.id)
                if matches(signal.key, self.pattern):
                    yield signal
                if self.closed:
                    return
            if len(batch) < BATCH:
                await self._wait(seen)

    async def _wait(self, seen: int) -> None:
        async with self.board.changed:
            try:
                await asyncio.wait_for(
                    self.board.changed.wait_for(lambda: self.closed or self.board.published != seen), self.board.poll
                )
            except TimeoutError:
                pass

    async def close(self) -> None:
        """Stop the subscription; a waiting iterator ends."""
        self.closed = True
        async with self.board.changed:
            self.board.changed.notify_all()


def _signal(row: tuple[Any, ...]) -> Signal:
    key, value, publisher, signal_id, at = row
    return Signal(key, value, publisher or None, str(signal_id), float(at))
