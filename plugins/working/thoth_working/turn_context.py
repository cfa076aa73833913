"""Which plugins' context recent model turns went without, kept where every process of the home sees it.

The runtime marks each model turn with the plugins whose `pre_spawn_context` timed out or failed
(`Turn.extra["missing_context"]`); the working layer's post-turn write keeps one row per turn
(`turn_context` in the session index: SQLite or the shared PostgreSQL), the last `KEPT` of them.
`thoth doctor` and the status panels count the last `COUNTED`: a block missing under load is a
failure people see, not only a log line. Rows hold the turn id, time, agent and plugin names only.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

KEPT = 200  # rows kept (older ones go as new turns come)
COUNTED = 50  # the recent turns a report counts


@dataclass(frozen=True)
class Missing:
    """Of the last `turns` model turns, how many went without each plugin's context, and why."""

    turns: int
    by_plugin: dict[str, Counter[str]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """One line per plugin, e.g. `identity: 8 of the last 40 turns ran without its context (timeout)`."""
        return [
            f"{plugin}: {sum(why.values())} of the last {self.turns} turns ran without its context "
            f"({', '.join(f'{n} {reason}' if len(why) > 1 else reason for reason, n in sorted(why.items()))})"
            for plugin, why in sorted(self.by_plugin.items())
        ]

    def summary(self) -> str:
        """All plugins in one short line, e.g. `identity 8/40 (timeout)`; empty when none went missing."""
        return "; ".join(
            f"{plugin} {sum(why.values())}/{self.turns} ({', '.join(sorted(why))})"
            for plugin, why in sorted(self.by_plugin.items())
        )


class ContextLog:
    """The `turn_context` table of a session index."""

    def __init__(self, db: Any, lock: threading.RLock) -> None:
        self._db = db
        self._lock = lock

    def note(self, turn_id: str, at: float, agent: str, missing: dict[str, str]) -> None:
        """Keep which plugins' context a turn went without (once per turn: a replay adds nothing)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO turn_context (turn_id, at, agent, missing) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (turn_id, at, agent, json.dumps(missing, sort_keys=True)),
            )
            self._db.execute(
                "DELETE FROM turn_context WHERE at < (SELECT at FROM turn_context ORDER BY at DESC LIMIT 1 OFFSET ?)",
                (KEPT - 1,),
            )

    def recent(self, agent: str, *, last: int = COUNTED) -> Missing:
        """What the agent's last `last` model turns went without."""
        with self._lock:
            rows = self._db.execute(
                "SELECT missing FROM turn_context WHERE agent = ? ORDER BY at DESC LIMIT ?", (agent, last)
            ).fetchall()
        by_plugin: dict[str, Counter[str]] = {}
        for (text,) in rows:
            for plugin, reason in json.loads(text).items():
                by_plugin.setdefault(plugin, Counter())[str(reason)] += 1
        return Missing(len(rows), by_plugin)
