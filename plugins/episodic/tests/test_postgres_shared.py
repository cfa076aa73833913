"""Several Thoth runtimes sharing one PostgreSQL (pgvector) store."""

from __future__ import annotations

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for

from thoth_core import ConfigError
from thoth_core.testing import context_for, make_test_runtime


async def test_two_runtimes_share_episodes_through_postgres(tmp_path, pg_dsn, monkeypatch):
    monkeypatch.setenv("THOTH_EPISODIC_DSN", pg_dsn)
    config = {"plugins": {"episodic": {"backend": "postgres", "dsn": {"$env": "THOTH_EPISODIC_DSN"}}}}
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
