"""A post-turn write replayed after a crash (the core's turn journal) stores, links and embeds the turn once."""

from __future__ import annotations

import numpy as np
from thoth_episodic import plugin
from thoth_episodic.contract import episode, unit
from thoth_episodic.memory import memory_for
from thoth_episodic.postgres_store import PostgresStore

from thoth_core import hookimpl
from thoth_core.journal import Entry


class CountingEmbedder:
    """Fixed vectors; remembers every text it embedded."""

    name = "counting"
    dim = 384

    def __init__(self):
        self.texts = []

    def embed(self, texts):
        self.texts += texts
        return np.stack([unit(len(text)) for text in texts])


class CountingEmbedderPlugin:
    def __init__(self):
        self.embedder = CountingEmbedder()

    @hookimpl
    def register_embedders(self, register):
        register("counting", lambda runtime, options: self.embedder)


def episode_texts(counting, word):
    """The episode texts (turn and reply, not recall queries) with this word that were embedded."""
    return [t for t in counting.embedder.texts if word in t and t.endswith("Noted.")]


def counting_runtime(make_runtime, counting):
    return make_runtime(
        {"episodic": plugin, "counting": counting},
        config={"plugins": {"episodic": {"embedder": "counting"}}},
        replies=[{"reply": "Noted."}],
    )


async def test_writing_a_turn_again_with_the_replay_stand_in_keeps_one_episode_embedded_once(make_runtime):
    counting = CountingEmbedderPlugin()
    runtime = counting_runtime(make_runtime, counting)
    await runtime.turn("What did we plan for the weekend?", peer="ann", thread="t")
    result = await runtime.turn("My cat Miso goes to the vet on Friday.", peer="ann", thread="t")
    await runtime.drain()
    memory = memory_for(runtime)
    assert memory.flush(timeout=10)
    before = {e.id: e.context for e in memory.store.episodes()}

    stand_in = Entry(result.turn, result.reply, result.session.id, result.session.started_at, ["episodic"]).session(
        runtime
    )
    plugin.post_turn_write(turn=result.turn, reply=result.reply, session=stand_in)
    plugin.post_turn_write(turn=result.turn, reply=result.reply, session=stand_in)
    assert memory.flush(timeout=10)

    assert {e.id: e.context for e in memory.store.episodes()} == before  # no episode added, no context linked again
    assert memory.store.find_turn(result.turn.id).user == "My cat Miso goes to the vet on Friday."
    assert len(episode_texts(counting, "Miso")) == 1
    assert len(memory.recall("Miso vet", workspace="default", peer="ann", k=5)) == 2


async def test_a_turn_written_before_the_kill_is_not_stored_again_by_the_recovery(make_runtime):
    counting = CountingEmbedderPlugin()
    first = counting_runtime(make_runtime, counting)
    result = await first.turn("Remember that my passport expires in May.", peer="ann", thread="t")
    await first.drain()
    # The process was killed after the episode was stored, before the journal struck the layer off:
    first.journal.append(result.turn, result.reply, result.session, ["episodic"])
    await first.aclose()

    second = counting_runtime(make_runtime, counting)
    assert await second.recover() == 1
    await second.drain()
    assert second.journal.pending() == []
    memory = memory_for(second)
    assert memory.flush(timeout=10)
    assert [e.turn_id for e in memory.store.episodes()] == [result.turn.id]
    assert len(episode_texts(counting, "passport")) == 1
    await second.aclose()


def test_a_postgres_table_made_before_the_unique_index_keeps_the_first_episode_of_a_turn(pg_dsn):
    import psycopg

    store = PostgresStore(pg_dsn)
    try:
        kept = episode("sold the old piano", turn_id="turn1")
        assert store.add([kept], np.stack([unit(1)])) == [kept]
        with psycopg.connect(pg_dsn, autocommit=True) as db:
            db.execute("DROP INDEX thoth_episodes_one_per_turn")  # as an earlier release made the table
            db.execute(  # and a replayed write stored the turn again
                "INSERT INTO thoth_episodes (id, workspace, peer, thread, turn_id, user_text, occurred_at, "
                "recorded_at) "
                "SELECT 'ep_replayed', workspace, peer, thread, turn_id, user_text, occurred_at, recorded_at "
                "FROM thoth_episodes"
            )
        assert store.count() == 2
    finally:
        store.close()
    store = PostgresStore(pg_dsn)
    try:
        assert [e.id for e in store.episodes()] == [kept.id]
        assert store.add([episode("sold the old piano", turn_id="turn1")]) == []
    finally:
        store.close()
