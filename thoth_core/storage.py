"""SQLite for plugins: one connection that worker threads share, in WAL mode, with numbered migrations.

Sync hook implementations run in worker threads, so a plugin's store opens its connection with
`check_same_thread=False` and guards it with its own lock. Migrations are applied in order on
open; `PRAGMA user_version` counts how many a database has seen.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

Migration = str | Callable[[sqlite3.Connection], object]


def connect(path: Path, *, synchronous: str = "NORMAL", rows: bool = False) -> sqlite3.Connection:
    """Open (creating its folder) a WAL database in autocommit mode; `rows` gives sqlite3.Row results."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30)
    if rows:
        db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(f"PRAGMA synchronous={synchronous}")
    return db


def migrate(db: sqlite3.Connection, migrations: Sequence[Migration]) -> None:
    """Apply the migrations (SQL scripts, each in one transaction, or functions) not yet applied."""
    done = db.execute("PRAGMA user_version").fetchone()[0]
    for number, step in enumerate(migrations[done:], start=done + 1):
        if isinstance(step, str):
            db.executescript(f"BEGIN; {step}; PRAGMA user_version = {number}; COMMIT;")
        else:
            step(db)
            db.execute(f"PRAGMA user_version = {number}")
