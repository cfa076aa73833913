"""Several Thoth runtimes sharing one PostgreSQL (pgvector) store."""

from __future__ import annotations

import psycopg
import pytest
from thoth_episodic import plugin
from thoth_episodic.contract import episode
from thoth_episodic.memory import memory_for
from thoth_episodic.postgres_store import PostgresStore
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core import ConfigError
from thoth_core.testing import context_for, make_test_runtime


@pytest.mark.parametrize("setting", ["dsn", "storage url"])
async def test_two_runtimes_share_episodes_through_postgres(tmp_path, pg_dsn, storage_url, monkeypatch, setting):
    monkeypatch.setenv("THOTH_EPISODIC_DSN", pg_dsn)
    config: dict = {"plugins": {"episodic": {"backend": "postgres", "dsn": {"$env": "THOTH_EPISODIC_DSN"}}}}
    if setting == "storage url":
        config = {"storage": {"url": storage_url}}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = make_test_runtime(tmp_path / "a", {"episodic": plugin}, config=config)
    second = make_test_runtime(tmp_path / "b", {"episodic": plugin}, config=config)
    try:
        await first.turn("Our wedding anniversary is on the 14th of June.", peer="ann", thread="t")
        await second.turn("I collect vintage stamps.", peer="ann", thread="u")
        await second.turn("My anniversary is in March.", peer="bob", thread="v")
        await first.drain()
        await second.drain()
        assembly = await context_for(second, "When is our anniversary?", peer="ann", thread="new")
        [block] = assembly.blocks
        assert block.text.splitlines()[0].endswith("Our wedding anniversary is on the 14th of June. / agent: ok")
        assert "March" not in block.text
        [status] = await first.status(peer="ann")
        assert status["episodes"] == 2
        assert await second.forget(peer="ann") == {"episodic": {"episodes": 2}}
        assert memory_for(first).recall("anniversary", workspace="default", peer="ann") == []
        assert [h.episode.peer for h in memory_for(first).recall("anniversary", workspace="default", peer="bob")] == [
            "bob"
        ]
    finally:
        await first.aclose()
        await second.aclose()


def test_postgres_without_dsn_names_the_key(tmp_path):
    runtime = make_test_runtime(
        tmp_path, {"episodic": plugin}, config={"plugins": {"episodic": {"backend": "postgres"}}}
    )
    with pytest.raises(ConfigError, match="plugins.episodic.dsn: the postgres backend needs a dsn"):
        memory_for(runtime).store


def test_a_storage_url_makes_postgres_the_default_backend_in_its_own_schema(tmp_path, storage_url):
    runtime = make_test_runtime(tmp_path, {"episodic": plugin}, config={"storage": {"url": storage_url}})
    memory = memory_for(runtime)
    try:
        assert isinstance(memory.store, PostgresStore) and memory.store.schema == "thoth_episodic"
        memory.store.add([episode("stored in the shared database")])
        with psycopg.connect(storage_url) as db:
            assert db.execute("SELECT user_text FROM thoth_episodic.thoth_episodes").fetchall() == [
                ("stored in the shared database",)
            ]
    finally:
        memory.close()


def test_an_explicit_sqlite_backend_wins_over_the_storage_url(tmp_path, storage_url):
    config = {"storage": {"url": storage_url}, "plugins": {"episodic": {"backend": "sqlite"}}}
    memory = memory_for(make_test_runtime(tmp_path, {"episodic": plugin}, config=config))
    try:
        assert isinstance(memory.store, SQLiteStore)
    finally:
        memory.close()


def test_a_bad_ann_mode_names_the_key_at_start(tmp_path, storage_url):
    config = {"storage": {"url": storage_url}, "plugins": {"episodic": {"ann": "faiss"}}}
    with pytest.raises(
        ConfigError, match="plugins.episodic.ann: expected one of 'auto', 'exact', 'usearch', 'hnsw', got 'faiss'"
    ):
        make_test_runtime(tmp_path, {"episodic": plugin}, config=config)
