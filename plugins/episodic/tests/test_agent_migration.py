"""Stores from before `[thoth] agent` gain the agent column; their episodes are the default agent's."""

from __future__ import annotations

import numpy as np
from thoth_episodic.contract import episode, query, unit
from thoth_episodic.postgres_store import PostgresStore
from thoth_episodic.sqlite_schema import MIGRATIONS
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core.storage import connect, migrate


def test_a_sqlite_file_from_before_agents_keeps_its_episodes_as_the_default_agents(tmp_path):
    path = tmp_path / "episodes.db"
    db = connect(path)
    migrate(db, MIGRATIONS[:3])  # the release before the agent column
    db.execute(
        "INSERT INTO episodes (rowid, id, workspace, peer, thread, user, occurred_at, recorded_at, embedding) "
        "VALUES (1, 'ep_old', 'w', 'ann', 't1', 'sold the old piano', 1699000000, 1699000000, ?)",
        (unit(4).tobytes(),),
    )
    db.execute("INSERT INTO episodes_fts (rowid, body, context, dates) VALUES (1, 'sold the old piano', '', '')")
    db.close()
    store = SQLiteStore(path)
    try:
        assert store.get("ep_old").agent == "default"
        assert [h.episode.id for h in store.search(query("piano", unit(4)))] == ["ep_old"]
        assert store.search(query("piano", unit(4), agent="a")) == []
        store.add([episode("sold the old piano", agent="a")], np.stack([unit(4)]))
        assert [h.episode.agent for h in store.search(query("piano", unit(4), agent="a"))] == ["a"]
    finally:
        store.close()


def test_a_postgres_table_from_before_agents_keeps_its_episodes_as_the_default_agents(pg_dsn):
    import psycopg

    PostgresStore(pg_dsn).close()
    with psycopg.connect(pg_dsn, autocommit=True) as db:
        db.execute("ALTER TABLE thoth_episodes DROP COLUMN agent")  # the table as the release before made it
        db.execute(
            "INSERT INTO thoth_episodes (id, workspace, peer, thread, user_text, body, occurred_at, recorded_at) "
            "VALUES ('ep_old', 'w', 'ann', 't1', 'sold the old piano', 'sold the old piano', 1699000000, 1699000000)"
        )
    store = PostgresStore(pg_dsn)
    try:
        assert store.get("ep_old").agent == "default"
        assert [h.episode.id for h in store.search(query("piano"))] == ["ep_old"]
        assert store.search(query("piano", agent="a")) == []
    finally:
        store.close()
