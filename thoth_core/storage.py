"""SQLite for plugins: one connection that worker threads share, in WAL mode, with numbered migrations.

Sync hook implementations run in worker threads, so a plugin's store opens its connection with
`check_same_thread=False` and guards it with its own lock. Migrations are applied in order on
open; `PRAGMA user_version` counts how many a database has seen.

Deleting a row does not erase its bytes: FTS5 only adds a tombstone (the old segment keeps the
text), and the WAL keeps the old pages until a checkpoint. Connections run with `secure_delete`
(deleted cells and freed pages are zeroed), and `scrub` finishes the job after a forget.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

Migration = str | Callable[[sqlite3.Connection], object]
BUSY_SECONDS = 30
SCRUB_WAIT_SECONDS = 2.0  # how long `scrub` retries a WAL truncation that readers block

logger = logging.getLogger(__name__)


def write_atomic(path: Path, data: str | bytes) -> None:
    """Replace a file's content in one step (a temporary file beside it, then a rename); makes its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    if isinstance(data, bytes):
        temporary.write_bytes(data)
    else:
        temporary.write_text(data, encoding="utf-8")
    os.replace(temporary, path)


def connect(
    path: Path, *, synchronous: str = "NORMAL", rows: bool = False, journal_mode: str = "WAL"
) -> sqlite3.Connection:
    """Open (creating its folder) a database (WAL unless told) in autocommit mode; `rows` gives sqlite3.Row results."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
    if rows:
        db.row_factory = sqlite3.Row
    _retry_while_locked(lambda: db.execute(f"PRAGMA journal_mode={journal_mode}"))  # busy timeout does not cover it
    db.execute(f"PRAGMA synchronous={synchronous}")
    db.execute("PRAGMA secure_delete=ON")  # deleted rows are zeroed, not left in free space
    return db


def scrub(db: sqlite3.Connection, *, fts: Sequence[str] = (), wait: float = SCRUB_WAIT_SECONDS) -> dict[str, int]:
    """Erase from the file what deletes left behind; call it after a forget's deletes, outside a transaction.

    `fts` names the FTS5 tables the deletes touched: `optimize` merges each into one segment, which
    drops the deleted terms (a delete only adds a tombstone). On a connection without `secure_delete`
    with freed pages, VACUUM rewrites the file. Then the WAL, which still holds the old pages, is
    checkpointed and truncated; readers in other processes can block that, so it is retried for
    `wait` seconds. Returns a receipt addition: `{}`, or `{"wal not truncated": 1}` (also logged).
    """
    for table in fts:
        db.execute(f'INSERT INTO "{table}" ("{table}") VALUES (\'optimize\')')
    if not db.execute("PRAGMA secure_delete").fetchone()[0] and db.execute("PRAGMA freelist_count").fetchone()[0]:
        db.execute("VACUUM")
    if _truncate_wal(db, wait):
        return {}
    name = db.execute("PRAGMA database_list").fetchone()[2]
    logger.warning("%s: readers kept the WAL from being truncated; deleted text stays in it until they finish", name)
    return {"wal not truncated": 1}


def _truncate_wal(db: sqlite3.Connection, wait: float) -> bool:
    """Checkpoint the WAL into the file and truncate it to zero bytes; False if readers kept it."""
    timeout = db.execute("PRAGMA busy_timeout").fetchone()[0]
    db.execute("PRAGMA busy_timeout = 100")  # the 30 s of `connect` would hold a forget up
    deadline = time.monotonic() + wait
    try:
        while True:
            try:
                if db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                    return True
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
    finally:
        db.execute(f"PRAGMA busy_timeout = {int(timeout)}")


def migrate(db: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Apply the migrations (SQL scripts or functions) not yet applied, each in its own transaction.

    Each step takes the write lock first and checks `user_version` again, so processes opening
    one file at the same moment apply every step once.
    """
    while db.execute("PRAGMA user_version").fetchone()[0] < len(migrations):
        db.execute("BEGIN IMMEDIATE")
        try:
            done = db.execute("PRAGMA user_version").fetchone()[0]
            if done < len(migrations):
                step = migrations[done]
                if isinstance(step, str):
                    for statement in _statements(step):
                        db.execute(statement)
                else:
                    step(db)
                db.execute(f"PRAGMA user_version = {done + 1}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


def _statements(script: str) -> list[str]:
    """The statements of an SQL script, split where `sqlite3.complete_statement` says one ends."""
    statements, current = [], ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return [s for s in statements if s.strip("; \n")]


def _retry_while_locked(action: Callable[[], object]) -> None:
    deadline = time.monotonic() + BUSY_SECONDS
    while True:
        try:
            action()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)
