"""The SQLite backend's schema and its migrations, in order (`PRAGMA user_version` counts them)."""

from __future__ import annotations

import sqlite3

from thoth_core.storage import Migration
from thoth_core.types import DEFAULT_AGENT

from .sqlite_rowids import never_reuse_rowids

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    rowid INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '', turn_id TEXT NOT NULL DEFAULT '',
    user TEXT NOT NULL, assistant TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '',
    context TEXT NOT NULL DEFAULT '',
    occurred_at REAL NOT NULL, recorded_at REAL NOT NULL, superseded_at REAL,
    cost_usd REAL, model TEXT NOT NULL DEFAULT '', consolidated INTEGER NOT NULL DEFAULT 0,
    embedding BLOB, vector_version INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS episodes_scope ON episodes (workspace, peer, thread, occurred_at);
CREATE INDEX IF NOT EXISTS episodes_id ON episodes (id);
CREATE INDEX IF NOT EXISTS episodes_turn ON episodes (turn_id);
CREATE INDEX IF NOT EXISTS episodes_occurred ON episodes (occurred_at);
CREATE INDEX IF NOT EXISTS episodes_newest ON episodes (workspace, peer, occurred_at);
CREATE VIRTUAL TABLE IF NOT EXISTS episodes_fts USING fts5(body, context, dates, tokenize = 'porter unicode61');
INSERT OR IGNORE INTO meta VALUES ('generation', '0')
"""


def _vector_versions(db: sqlite3.Connection) -> None:
    """Migration 2: `vector_version` (which vectors changed since a cache loaded) and an index of rows without one."""
    if "vector_version" not in {row[1] for row in db.execute("PRAGMA table_info(episodes)")}:
        db.execute("ALTER TABLE episodes ADD COLUMN vector_version INTEGER NOT NULL DEFAULT 0")
    db.execute("CREATE INDEX IF NOT EXISTS episodes_vector_version ON episodes (vector_version)")
    db.execute(
        "CREATE INDEX IF NOT EXISTS episodes_unembedded ON episodes (occurred_at) "
        "WHERE embedding IS NULL AND superseded_at IS NULL"
    )
    db.execute("INSERT OR IGNORE INTO meta VALUES ('vectors', '0')")


def _one_episode_per_turn(db: sqlite3.Connection) -> None:
    """Migration 3: at most one current episode per (workspace, peer, turn id), so a replayed write stores nothing.

    Copies a replayed write stored before this migration are deleted (every version), keeping the first.
    """
    doubles = db.execute(
        "SELECT DISTINCT e.id FROM episodes e JOIN episodes kept ON kept.workspace = e.workspace "
        "AND kept.peer = e.peer AND kept.turn_id = e.turn_id AND kept.superseded_at IS NULL AND kept.rowid < e.rowid "
        "WHERE e.turn_id != '' AND e.superseded_at IS NULL AND kept.id != e.id"
    ).fetchall()
    for (episode_id,) in doubles:
        db.execute("DELETE FROM episodes_fts WHERE rowid IN (SELECT rowid FROM episodes WHERE id = ?)", (episode_id,))
        db.execute("DELETE FROM episodes WHERE id = ?", (episode_id,))
    if doubles:
        db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
    db.execute(
        "CREATE UNIQUE INDEX episodes_one_per_turn ON episodes (workspace, peer, turn_id) "
        "WHERE turn_id != '' AND superseded_at IS NULL"
    )


# Migration 4: the agent each episode belongs to (`[thoth] agent`); older episodes are the default agent's.
AGENT_COLUMN = f"ALTER TABLE episodes ADD COLUMN agent TEXT NOT NULL DEFAULT '{DEFAULT_AGENT}'"

# Migration 5: `AUTOINCREMENT` (a rowid is never given twice), see `sqlite_rowids`.
MIGRATIONS: list[Migration] = [SCHEMA, _vector_versions, _one_episode_per_turn, AGENT_COLUMN, never_reuse_rowids]


def newest_rowid(db: sqlite3.Connection) -> int:
    """About how many rows the store has held (its newest rowid), without a scan."""
    return int(db.execute("SELECT coalesce(max(rowid), 0) FROM episodes").fetchone()[0])
