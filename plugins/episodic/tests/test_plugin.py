"""The episodic plugin through a real runtime: write path, read path, commands, forget, retention."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from thoth_episodic import plugin
from thoth_episodic.embedder import EmbedderUnavailable, MiniLMEmbedder
from thoth_episodic.memory import explain_hit, memory_for, summarize
from thoth_episodic.records import Episode
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core import ConfigError, hookimpl
from thoth_core.testing import check_layer_plugin, context_for

DAY = 86400.0


def store_of(runtime):
    return memory_for(runtime).store


async def test_a_turn_is_written_as_an_episode_after_the_reply(make_runtime):
    runtime = make_runtime({"episodic": plugin}, replies=[{"reply": "Miso is a lovely name. Cats are great."}])
    result = await runtime.turn("I adopted a cat called Miso. She is grey.", peer="ann", thread="t1")
    assert result.reply.text.startswith("Miso")
    assert store_of(runtime).count() == 0  # the write runs in the background, after the reply
    await runtime.drain()
    [episode] = list(store_of(runtime).episodes())
    assert (episode.workspace, episode.peer, episode.thread) == ("default", "ann", "t1")
    assert episode.user == "I adopted a cat called Miso. She is grey."
    assert episode.assistant == "Miso is a lovely name. Cats are great."
    assert episode.summary == "I adopted a cat called Miso. / Miso is a lovely name."
    assert episode.turn_id == result.session.transcript[-1]["turn_id"] and episode.session_id == result.session.id
    assert episode.model == "replay" and episode.occurred_at <= episode.recorded_at


async def test_the_first_turn_of_a_new_thread_gets_related_episodes_only_once(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    for text in [
        "My daughter Lea starts school in Porto next week.",
        "I prefer tea to coffee.",
        "The car needs new tyres.",
    ]:
        await runtime.turn(text, peer="ann", thread="old")
    await runtime.drain()
    first = await runtime.turn("How will Lea's first school day go?", peer="ann", thread="new")
    [block] = [b for b in first.assembly.blocks if b.plugin == "episodic"]
    assert block.tag == "related-episodes" and block.layer == "episodic"
    lines = block.text.splitlines()
    assert len(lines) == 3 and "Lea starts school" in lines[0] and "thread old" in lines[0]
    second = await runtime.turn("And after school?", peer="ann", thread="new")
    assert [b for b in second.assembly.blocks if b.plugin == "episodic"] == []


async def test_a_peer_never_sees_another_peers_episodes(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    await runtime.turn("My bank PIN hint is the blue heron.", peer="ann", thread="a")
    await runtime.turn("I like football.", peer="bob", thread="b", workspace="default")
    await runtime.turn("My bank PIN hint is the red fox.", peer="ann", thread="c", workspace="elsewhere")
    await runtime.drain()
    bob = await context_for(runtime, "What is my bank PIN hint?", peer="bob", thread="b2")
    assert all("heron" not in b.text and "fox" not in b.text for b in bob.blocks)
    ann = await context_for(runtime, "What is my bank PIN hint?", peer="ann", thread="a2")
    [block] = ann.blocks
    assert "heron" in block.text and "fox" not in block.text and "football" not in block.text
    reply = await runtime.turn("/recall bank PIN", peer="bob", thread="b")
    assert "heron" not in reply.reply.text


async def test_conformance_kit(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    await check_layer_plugin(runtime, "episodic")


async def test_a_search_explains_each_hit_in_one_line_of_at_most_80_columns(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    texts = [
        "We booked the flight to Montreal for the conference in the spring, window seats, two bags each.",
        "Montreal trip: the hotel is near the old port; the trip home is on Sunday.",
        "Dinner was pasta.",
        "The trip to the dentist is Tuesday.",
    ]
    for text in texts:
        await runtime.turn(text, peer="ann", thread="t1")
    await runtime.drain()
    hits = memory_for(runtime).recall("Montreal trip", workspace="default", peer="ann", k=5)
    lines = [explain_hit(i, hit) for i, hit in enumerate(hits, 1)]  # as `thoth episodes search` prints them
    out = "\n".join(lines)
    assert len(lines) == len(hits) >= 3 and all(len(line) <= 80 for line in lines), lines
    today = time.strftime("%Y-%m-%d", time.gmtime())
    assert lines[0].startswith(f'1. {today} ann/t1  "') and '…"' in out  # the long turn is clipped
    ranked = [h for h in hits if h.bm25_rank is not None]
    assert len({h.bm25_rank for h in ranked}) >= 2  # BM25 ranked these hits differently ...
    for line, hit in zip(lines, hits, strict=True):
        assert line.endswith(f"dense {hit.dense:.2f} · bm25 " + (f"#{hit.bm25_rank}" if hit.bm25_rank else "–"))
    shown = {line.rsplit("bm25 ", 1)[1] for line, hit in zip(lines, hits, strict=True) if hit.bm25_rank}
    assert len(shown) == len(ranked)  # ... and the lines say so


def test_a_hit_bm25_did_not_find_shows_a_dash_and_wide_text_still_fits():
    from thoth_episodic.memory import explain_hit
    from thoth_episodic.records import Hit

    long_thread = "a-very-long-slack-thread-name"
    episode = Episode(workspace="w", peer="ann", thread=long_thread, user="東京の旅行の話 " * 20)
    line = explain_hit(12, Hit(episode, 0.5, dense=0.712, dense_rank=1))
    assert line.endswith("dense 0.71 · bm25 –") and "ann/a-very-long-sla…  " in line
    assert sum(2 if "\u3000" <= c <= "\u9fff" else 1 for c in line) <= 80


async def test_forget_deletes_a_thread_then_everything_and_says_what(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    for thread in ("t1", "t1", "t2"):
        await runtime.turn(f"note in {thread}", peer="ann", thread=thread)
    await runtime.turn("bob's note", peer="bob", thread="t1")
    await runtime.drain()
    assert await runtime.forget(peer="ann", thread="t1") == {"episodic": {"episodes": 2}}
    out = (await runtime.turn("/forget all", peer="ann", thread="t2")).reply.text
    assert "episodic: 1 episodes" in out
    assert [e.peer for e in store_of(runtime).episodes()] == ["bob"]
    assert await runtime.forget(peer="ann") == {}


async def test_forget_reaction_deletes_that_turns_episode(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    kept = await runtime.turn("keep this", peer="ann", thread="t")
    dropped = await runtime.turn("drop this", peer="ann", thread="t")
    await runtime.drain()
    turn_id = dropped.session.transcript[-1]["turn_id"]
    [outcome] = await runtime.feedback("forget", turn_id=turn_id, text="", actor="ann", session=dropped.session)
    assert outcome["episodes"] == 1 and outcome["plugin"] == "episodic"
    assert [e.user for e in store_of(runtime).episodes()] == ["keep this"]
    assert (
        await runtime.feedback(
            "approve", turn_id=kept.session.transcript[0]["turn_id"], text="", actor="ann", session=kept.session
        )
        == []
    )


async def test_layer_status_counts_this_peers_episodes(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    await runtime.turn("one", peer="ann", thread="t")
    await runtime.turn("two", peer="bob", thread="t")
    await runtime.drain()
    [status] = await runtime.status(peer="ann")
    expected = {"layer": "episodic", "backend": "sqlite", "episodes": 1, "embedder": "minilm", "plugin": "episodic"}
    assert status == expected


def old_episode(text: str, days: float) -> Episode:
    at = time.time() - days * DAY
    return Episode(workspace="default", peer="ann", thread="t", user=text, occurred_at=at, recorded_at=at)


class Reflection:
    """Stands in for the reflection plugin: only its presence matters here."""

    @hookimpl
    def session_end(self, session, reason):
        return None


async def test_expired_episodes_wait_for_consolidation_when_reflection_runs(make_runtime):
    runtime = make_runtime(
        {"episodic": plugin, "reflection": Reflection()}, config={"plugins": {"episodic": {"retention_days": 30}}}
    )
    memory = memory_for(runtime)
    old, fresh = old_episode("old news", 40), old_episode("fresh news", 2)
    memory.write_many([old, fresh])
    [record] = plugin.expiring_records(before=time.time() - 30 * DAY, runtime=runtime)
    assert record["id"] == old.id and record["plugin"] == "episodic" and record["text"] == "old news"
    assert record["peer"] == "ann"  # the nightly job writes `ann: ` in front of the text itself
    assert memory.retire() == 0 and memory.store.get(old.id) is not None
    plugin.records_consolidated(ids=[old.id], runtime=runtime)
    assert memory.store.get(old.id) is None and memory.store.get(fresh.id) is not None
    assert plugin.expiring_records(before=time.time() - 30 * DAY, runtime=runtime) == []


async def test_expired_episodes_go_at_once_without_reflection(make_runtime):
    runtime = make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"retention_days": 30}}})
    memory = memory_for(runtime)
    memory.write_many([old_episode("old news", 40)])
    await runtime.turn("new turn", peer="ann", thread="t")
    await runtime.drain()
    assert [e.user for e in memory.store.episodes()] == ["new turn"]


async def test_no_retention_keeps_everything(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    memory_for(runtime).write_many([old_episode("ancient", 4000)])
    assert plugin.expiring_records(before=time.time(), runtime=runtime) == []
    assert memory_for(runtime).retire() == 0


class BrokenEmbedder:
    name = "broken"
    dim = 384

    def embed(self, texts):
        raise EmbedderUnavailable(
            "episodic: model.onnx is missing; reinstall thoth-episodic: pip install --force-reinstall thoth-episodic"
        )


class BrokenEmbedderPlugin:
    @hookimpl
    def register_embedders(self, register):
        register("broken", lambda runtime, options: BrokenEmbedder())


async def test_without_the_model_the_layer_keeps_working_on_bm25(make_runtime, caplog):
    runtime = make_runtime(
        {"episodic": plugin, "broken-embedder": BrokenEmbedderPlugin()},
        config={"plugins": {"episodic": {"embedder": "broken"}}},
    )
    with caplog.at_level(logging.WARNING):
        await runtime.turn("The plumber comes on Thursday.", peer="ann", thread="t")
        await runtime.turn("Something else entirely.", peer="ann", thread="t")
        await runtime.drain()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "reinstall thoth-episodic" in warnings[0] and "BM25 alone" in warnings[0]
    [hit] = memory_for(runtime).recall("when is the plumber coming", workspace="default", peer="ann", k=1)
    assert "plumber" in hit.episode.user and hit.dense is None and hit.bm25_rank == 1
    [status] = await runtime.status(peer="ann")
    assert status["embedder"] == "bm25-only"


class GatedEmbedder:
    """The real MiniLM; the background embedder's calls wait until the test opens the gate."""

    name = "gated"
    dim = 384

    def __init__(self):
        self.gate = threading.Event()
        self.batches = []
        self.model = MiniLMEmbedder()

    def embed(self, texts):
        if threading.current_thread().name == "episodic-embed":
            assert self.gate.wait(30)
            self.batches.append(len(texts))
        return self.model.embed(texts)


class GatedEmbedderPlugin:
    def __init__(self):
        self.embedder = GatedEmbedder()

    @hookimpl
    def register_embedders(self, register):
        register("gated", lambda runtime, options: self.embedder)


def test_a_write_returns_before_its_embedding_and_queued_episodes_are_embedded_in_one_batch(make_runtime):
    gated = GatedEmbedderPlugin()
    runtime = make_runtime(
        {"episodic": plugin, "gated": gated}, config={"plugins": {"episodic": {"embedder": "gated"}}}
    )
    memory = memory_for(runtime)
    written = [
        memory.write(Episode(workspace="default", peer="ann", thread="t", user=f"Note {i} about the sailing trip."))
        for i in range(10)
    ]
    assert not memory.flush(timeout=0.2)  # the embedder is still held back, yet every write has returned
    hits = memory.recall("sailing", workspace="default", peer="ann", k=3)
    assert hits and all(h.dense is None for h in hits)  # found by BM25 already
    gated.embedder.gate.set()
    assert memory.flush(timeout=30)
    assert sum(gated.embedder.batches) == 10 and len(gated.embedder.batches) <= 2  # the first, then the 9 waiting
    assert memory.store.unembedded(limit=20) == []
    [hit] = memory.recall("a trip on a boat", workspace="default", peer="ann", k=1)
    assert hit.dense is not None and hit.episode.id in {e.id for e in written}


class CrashingEmbedder:
    name = "crashing"
    dim = 384

    def embed(self, texts):
        raise RuntimeError("model file is corrupt")


def test_an_embedder_that_crashes_loses_no_episode_and_is_logged(make_runtime, caplog):
    class Crashing:
        @hookimpl
        def register_embedders(self, register):
            register("crashing", lambda runtime, options: CrashingEmbedder())

    runtime = make_runtime(
        {"episodic": plugin, "crashing": Crashing()}, config={"plugins": {"episodic": {"embedder": "crashing"}}}
    )
    memory = memory_for(runtime)
    with caplog.at_level(logging.ERROR):
        for text in ("The boiler was serviced in May.", "The boiler makes a noise again."):
            memory.write(Episode(workspace="default", peer="ann", thread="t", user=text))
        assert memory.flush(timeout=10)
    assert any("embedding" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
    assert memory.store.count() == 2 and len(memory.store.unembedded(limit=5)) == 2
    hits = memory.recall("boiler", workspace="default", peer="ann", k=5)
    assert len(hits) == 2 and all(h.dense is None for h in hits)  # BM25 still finds them


async def test_without_a_model_flush_says_nothing_was_embedded_and_close_does_not_wait(make_runtime):
    runtime = make_runtime(
        {"episodic": plugin, "broken-embedder": BrokenEmbedderPlugin()},
        config={"plugins": {"episodic": {"embedder": "broken"}}},
    )
    memory = memory_for(runtime)
    memory.write(Episode(workspace="default", peer="ann", thread="t", user="The plumber comes on Thursday."))
    assert memory.flush(timeout=10) is False
    started = time.monotonic()
    memory.close()
    assert time.monotonic() - started < 1.0


def test_closing_embeds_what_is_still_queued(make_runtime, thoth_home):
    runtime = make_runtime({"episodic": plugin})
    memory = memory_for(runtime)
    for i in range(40):
        memory.write(Episode(workspace="default", peer="ann", thread=f"t{i % 3}", user=f"Queued note number {i}."))
    memory.close()
    store = SQLiteStore(thoth_home / "episodic" / "episodes.db")
    try:
        assert store.count() == 40 and store.unembedded(limit=50) == []
    finally:
        store.close()


async def test_episodes_stored_without_a_model_are_embedded_at_the_next_start_that_has_one(make_runtime, caplog):
    without = make_runtime(
        {"episodic": plugin, "broken-embedder": BrokenEmbedderPlugin()},
        config={"plugins": {"episodic": {"embedder": "broken"}}},
    )
    for text in ("The plumber comes on Thursday.", "My sister lives in Bergen."):
        await without.turn(text, peer="ann", thread="t")
    await without.drain()
    assert len(memory_for(without).store.unembedded(limit=10)) == 2
    memory_for(without).close()

    memory = memory_for(make_runtime({"episodic": plugin}))
    with caplog.at_level(logging.INFO, logger="thoth_episodic"):
        memory.warm_up()  # what session_start does
        assert memory.flush(timeout=60)
    assert memory.store.unembedded(limit=10) == []
    assert "embedded 2 stored episodes that had no vector" in caplog.text
    [hit] = memory.recall("a relative in Norway", workspace="default", peer="ann", k=1)
    assert "Bergen" in hit.episode.user and hit.dense is not None


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"tau_days": -1}, "tau_days"),
        ({"recency_weight": 2}, "recency_weight"),
        ({"fusion": "max"}, "fusion"),
        ({"prefilter_newest": "200"}, "prefilter_newest"),
        ({"backend": 3}, "backend"),
    ],
)
def test_bad_settings_name_the_key(make_runtime, table, key):
    runtime = make_runtime({}, config={"plugins": {"episodic": table}})
    with pytest.raises(ConfigError, match=f"plugins.episodic.{key}"):
        memory_for(runtime)


async def test_unknown_backend_names_the_installed_ones(make_runtime):
    runtime = make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"backend": "nope"}}})
    with pytest.raises(ConfigError, match="unknown episodic backend 'nope'; installed: postgres, sqlite"):
        memory_for(runtime).store


async def test_a_third_party_backend_registers_through_the_hook(make_runtime, tmp_path):
    from thoth_episodic.sqlite_store import SQLiteStore

    made = []

    class ThirdParty:
        @hookimpl
        def register_episodic_backends(self, register):
            register("mine", lambda runtime, options: made.append(options) or SQLiteStore(tmp_path / "mine.db"))

    runtime = make_runtime(
        {"episodic": plugin, "third": ThirdParty()}, config={"plugins": {"episodic": {"backend": "mine", "x": 1}}}
    )
    await runtime.turn("hello there", peer="ann", thread="t")
    await runtime.drain()
    assert made[0]["x"] == 1 and memory_for(runtime).store.count() == 1 and (tmp_path / "mine.db").exists()


def test_summary_keeps_the_first_sentence_of_each_side():
    assert summarize("Hi. I moved to Oslo last week!  Big change.", "Welcome! How is it?") == "Hi. / Welcome!"
    assert summarize("no punctuation here", "") == "no punctuation here"


def test_neighbour_turns_are_indexed_with_each_episode(make_runtime):
    runtime = make_runtime({"episodic": plugin})
    memory = memory_for(runtime)
    first = memory.write(Episode(workspace="default", peer="ann", thread="t", user="What did you do on Saturday?"))
    second = memory.write(Episode(workspace="default", peer="ann", thread="t", user="I went climbing."))
    assert memory.store.get(second.id).context == "What did you do on Saturday?"
    assert memory.store.get(first.id).context == "\nI went climbing."  # line 1: no previous turn; line 2: the next
    vector = memory.embed(["x"])
    assert vector is not None and vector.shape == (1, 384) and np.isclose(np.linalg.norm(vector), 1.0)


async def test_prefilter_setting_limits_recall_to_the_newest_episodes(make_runtime, thoth_home):
    old = old_episode("The spare key is under the blue flowerpot.", 300)
    newer = [old_episode(f"Weather chat number {i}.", 1 + i / 100) for i in range(5)]
    for prefilter, found in ((0, True), (3, False)):
        runtime = make_runtime(
            {"episodic": plugin},
            config={
                "plugins": {"episodic": {"prefilter_newest": prefilter, "path": str(thoth_home / f"{prefilter}.db")}}
            },
        )
        memory = memory_for(runtime)
        memory.write_many([Episode.from_dict(e.to_dict()) for e in [old, *newer]])
        hits = memory.recall("where is the spare key?", workspace="default", peer="ann", k=3)
        assert (old.id in {h.episode.id for h in hits}) is found
