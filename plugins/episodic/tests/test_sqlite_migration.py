"""A store written by the first release (no `vector_version`) opens, keeps its episodes and finds them."""

from __future__ import annotations

import sqlite3

import numpy as np
from thoth_episodic.contract import episode, query, unit
from thoth_episodic.sqlite_store import SQLiteStore

FIRST_RELEASE = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE episodes (
    rowid INTEGER PRIMARY KEY, id TEXT NOT NULL,
    workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '', turn_id TEXT NOT NULL DEFAULT '',
    user TEXT NOT NULL, assistant TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '',
    context TEXT NOT NULL DEFAULT '',
    occurred_at REAL NOT NULL, recorded_at REAL NOT NULL, superseded_at REAL,
    cost_usd REAL, model TEXT NOT NULL DEFAULT '', consolidated INTEGER NOT NULL DEFAULT 0,
    embedding BLOB
);
CREATE VIRTUAL TABLE episodes_fts USING fts5(body, context, dates, tokenize = 'porter unicode61');
INSERT INTO meta VALUES ('generation', '0');
INSERT INTO episodes VALUES (1, 'ep_old', 'w', 'ann', 't1', '', '', 'sold the old piano', '', '', '',
    1699000000, 1699000000, NULL, NULL, '', 0, NULL);
INSERT INTO episodes_fts (rowid, body, context, dates) VALUES (1, 'sold the old piano', '', '');
"""


def test_a_first_release_file_is_migrated_in_place(tmp_path):
    path = tmp_path / "episodes.db"
    db = sqlite3.connect(path)
    db.executescript(FIRST_RELEASE)
    db.close()
    store = SQLiteStore(path)
    try:
        assert [e.id for e in store.unembedded(limit=5)] == ["ep_old"]
        assert [h.episode.id for h in store.search(query("piano"))] == ["ep_old"]
        store.set_vectors(["ep_old"], np.stack([unit(4)]))
        newer = episode("tuned the guitar")
        store.add([newer], np.stack([unit(5)]))
        assert [h.episode.id for h in store.search(query("zzz", unit(4), k=1, tau_days=0))] == ["ep_old"]
    finally:
        store.close()
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (2,)
