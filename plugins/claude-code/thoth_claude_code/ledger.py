"""Which Claude Code turns Thoth has recorded: a small SQLite table of turn ids, so each is recorded once.

Two Stop hooks may run at once (or Stop and SessionEnd): a turn is claimed with an insert before it
is recorded, and only the process whose insert landed records it. The ledger holds Claude Code's
message uuids and session ids, never text, and keeps them after `thoth forget`: a forgotten turn
must not come back from Claude Code's own transcript at the next Stop.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from thoth_core.storage import connect, migrate

MIGRATIONS = [
    """
    CREATE TABLE claude_code_recorded (
        turn_id TEXT PRIMARY KEY,
        claude_session TEXT NOT NULL,
        recorded_at REAL NOT NULL
    );
    """
]


class Ledger:
    """The recorded-turns table in `HOME/claude-code/ledger.db`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db = connect(path)
        self._lock = threading.Lock()
        migrate(self._db, MIGRATIONS)

    def recorded(self, turn_ids: list[str]) -> set[str]:
        """The ids among turn_ids already recorded (or being recorded)."""
        with self._lock:
            found: set[str] = set()
            for start in range(0, len(turn_ids), 500):
                chunk = turn_ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT turn_id FROM claude_code_recorded WHERE turn_id IN ({marks})", chunk
                ).fetchall()
                found |= {row[0] for row in rows}
            return found

    def claim(self, turn_id: str, claude_session: str) -> bool:
        """Mark a turn recorded; False if another hook had already claimed it."""
        with self._lock:
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO claude_code_recorded (turn_id, claude_session, recorded_at) VALUES (?,?,?)",
                (turn_id, claude_session, time.time()),
            )
            return cursor.rowcount == 1

    def release(self, turn_id: str) -> None:
        """Undo a claim whose recording failed, so the next hook tries again."""
        with self._lock:
            self._db.execute("DELETE FROM claude_code_recorded WHERE turn_id=?", (turn_id,))

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            self._db.close()


__all__ = ["Ledger"]
