"""SQLite for plugins: one connection that worker threads share, in WAL mode, with numbered migrations.

Sync hook implementations run in worker threads, so a plugin's store opens its connection with
`check_same_thread=False` and guards it with its own lock. Migrations are applied in order on
open; `PRAGMA user_version` counts how many a database has seen.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Sequence
from pathlib import Path

Migration = str | Callable[[sqlite3.Connection], object]
BUSY_SECONDS = 30


def connect(path: Path, *, synchronous: str = "NORMAL", rows: bool = False) -> sqlite3.Connection:
    """Open (creating its folder) a WAL database in autocommit mode; `rows` gives sqlite3.Row results."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=BUSY_SECONDS)
    if rows:
        db.row_factory = sqlite3.Row
    _retry_while_locked(lambda: db.execute("PRAGMA journal_mode=WAL"))  # the busy timeout does not cover it
    db.execute(f"PRAGMA synchronous={synchronous}")
    return db


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
