"""Stores written by earlier releases open, keep their episodes and find them."""

from __future__ import annotations

import sqlite3

import numpy as np
from thoth_episodic.contract import episode, query, unit
from thoth_episodic.sqlite_schema import MIGRATIONS
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core.storage import connect, migrate

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
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)


def test_a_turn_stored_twice_before_the_unique_index_keeps_its_first_episode(tmp_path):
    path = tmp_path / "episodes.db"
    db = connect(path)
    migrate(db, MIGRATIONS[:2])  # the release before one episode per turn
    for rowid, episode_id, peer in [(1, "ep_first", "ann"), (2, "ep_replayed", "ann"), (3, "ep_bob", "bob")]:
        db.execute(
            "INSERT INTO episodes (rowid, id, workspace, peer, thread, turn_id, user, occurred_at, recorded_at) "
            "VALUES (?, ?, 'w', ?, 't1', 'turn1', 'sold the old piano', 1699000000, 1699000000)",
            (rowid, episode_id, peer),
        )
        db.execute(
            "INSERT INTO episodes_fts (rowid, body, context, dates) VALUES (?, 'sold the old piano', '', '')", (rowid,)
        )
    db.close()
    store = SQLiteStore(path)
    try:
        assert sorted(e.id for e in store.episodes()) == ["ep_bob", "ep_first"]
        assert [h.episode.id for h in store.search(query("piano"))] == ["ep_first"]
        assert store.add([episode("sold the old piano", turn_id="turn1")]) == []
    finally:
        store.close()
