"""Several agents on one home (`[thoth] agent`): own working sessions and episodes, one shared identity."""

from __future__ import annotations

import sqlite3
import tomllib

import pytest
from thoth_episodic import plugin as episodic
from thoth_episodic.memory import memory_for
from thoth_identity import plugin as identity
from thoth_working import plugin as working

from thoth_core import ConfigError
from thoth_core.config import Config, load_config
from thoth_core.journal import TurnJournal
from thoth_core.runtime import Runtime
from thoth_core.testing import context_for, make_test_runtime
from thoth_core.types import DEFAULT_AGENT, Reply, Session, Turn

LAYERS = {"working": working, "episodic": episodic, "identity": identity}


def agent_runtime(home, agent=None, **kwargs):
    """A runtime on `home` as agent `agent` (None: the config names none)."""
    config = {"thoth": {"agent": agent}} if agent else {}
    return make_test_runtime(home, LAYERS, config=config, **kwargs)


async def test_two_agents_on_one_home_keep_their_own_sessions_and_episodes_but_share_identity(tmp_path):
    a, b = agent_runtime(tmp_path, "a"), agent_runtime(tmp_path, "b")
    try:
        await a.turn("/remember I live in Oslo", peer="ann", thread="t")
        await a.turn("My violin lesson moved to Thursday.", peer="ann", thread="t")
        await a.drain()
        await b.turn("Hello there.", peer="ann", thread="u")
        await b.drain()
        assert (a.agent, b.agent) == ("a", "b")

        by_a = memory_for(a).recall("violin lesson", workspace="default", peer="ann")
        by_b = memory_for(b).recall("violin lesson", workspace="default", peer="ann")
        assert [(h.episode.agent, h.episode.user) for h in by_a][0] == ("a", "My violin lesson moved to Thursday.")
        assert {h.episode.agent for h in by_a} == {"a"}
        assert [(h.episode.agent, h.episode.user) for h in by_b] == [("b", "Hello there.")]
        asked = await context_for(b, "When is my violin lesson?", peer="ann", thread="new")
        blocks = {block.tag: block.text for block in asked.blocks}
        assert "Hello there." in blocks["related-episodes"] and "violin" not in blocks["related-episodes"]
        assert "Oslo" in blocks["user-model"]  # what agent a learned about ann, agent b knows: identity is shared

        assert await a.last_thread(peer="ann") == "t" and await b.last_thread(peer="ann") == "u"
        status = {s["plugin"]: s for s in await b.status(peer="ann")}
        assert (status["working"]["sessions"], status["working"]["turns"], status["episodic"]["episodes"]) == (1, 1, 1)
        await a.aclose()
        again = agent_runtime(tmp_path, "a")  # a restart of agent a resumes its own thread, not b's
        resumed = await again.session(peer="ann", thread="t")
        assert "violin" in resumed.history[-2].content
        assert (await again.session(peer="ann", thread="u")).history == []

        receipt = await again.forget(peer="ann")  # forgetting is about the person: every agent's copy goes
        assert receipt["working"]["sessions"] == 2 and receipt["episodic"] == {"episodes": 2}
        assert memory_for(b).store.count(peer="ann") == 0 and await b.last_thread(peer="ann") is None
        await again.aclose()
    finally:
        await a.aclose()
        await b.aclose()


async def test_without_an_agent_everything_is_the_default_agents(tmp_path):
    runtime = agent_runtime(tmp_path)
    try:
        result = await runtime.turn("I bought a red kayak.", peer="ann", thread="t")
        await runtime.drain()
        assert runtime.agent == result.session.agent == result.turn.agent == DEFAULT_AGENT
        [stored] = memory_for(runtime).store.episodes()
        assert stored.agent == DEFAULT_AGENT
    finally:
        await runtime.aclose()


async def test_a_turn_another_agents_process_left_unwritten_is_replayed_as_that_agents(tmp_path):
    journal = TurnJournal(tmp_path / "journal.db")
    turn = Turn("My bike is blue.", "ann", "t", agent="a")
    session = Session("default", "ann", "t", agent="a")
    journal.append(turn, Reply("noted", finished_at=turn.created_at), session, ["episodic", "working"])
    journal.close()
    b = agent_runtime(tmp_path, "b")
    try:
        await b.session(peer="bob", thread="x")  # the first session replays the journal
        await b.drain()
        [episode] = memory_for(b).store.episodes()
        assert (episode.agent, episode.user) == ("a", "My bike is blue.")
        assert memory_for(b).recall("bike", workspace="default", peer="ann") == []
        with sqlite3.connect(tmp_path / "working" / "sessions.db") as db:
            assert db.execute("SELECT agent FROM sessions WHERE peer = 'ann'").fetchall() == [("a",)]
    finally:
        await b.aclose()


def test_the_agent_comes_from_the_environment_before_the_file(tmp_path, monkeypatch):
    path = tmp_path / "thoth.toml"
    path.write_text('[thoth]\nagent = "scout"\n', encoding="utf-8")
    assert Runtime(load_config(path), autoload=False, home=tmp_path).agent == "scout"
    monkeypatch.setenv("THOTH_AGENT", "critic")
    assert Runtime(load_config(path), autoload=False, home=tmp_path).agent == "critic"
    monkeypatch.setenv("THOTH_AGENT", "no spaces")
    with pytest.raises(ConfigError, match=r"^THOTH_AGENT: expected an agent name .*got 'no spaces'$"):
        Runtime(load_config(path), autoload=False, home=tmp_path)


@pytest.mark.parametrize("value", ['"two words"', '""', '"../up"', "7"])
def test_a_bad_agent_name_is_one_line_naming_the_key(tmp_path, value):
    path = tmp_path / "thoth.toml"
    path.write_text(f"[thoth]\nagent = {value}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}:2: thoth.agent: expected an agent name") as raised:
        load_config(path)
    assert "\n" not in str(raised.value)
    with pytest.raises(ConfigError, match="thoth.agent"):  # a config built in code is checked by the runtime
        Runtime(Config(data={"thoth": {"agent": tomllib.loads(f"v = {value}")["v"]}}), autoload=False, home=tmp_path)
