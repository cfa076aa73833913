"""A recall while the embedder is still loading at process start answers with BM25 alone instead of waiting."""

from __future__ import annotations

import threading
import time

import numpy as np
from thoth_episodic import plugin
from thoth_episodic.contract import unit
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode

from thoth_core import Message, hookimpl


class SlowLoadingEmbedder:
    """Its first call blocks until `loaded` is set, as a model loading on a busy machine does."""

    name = "slow"
    dim = 384

    def __init__(self):
        self.loaded = threading.Event()
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.loaded.wait(30)
        self.calls.append(list(texts))
        return np.stack([unit(len(text)) for text in texts])


class SlowPlugin:
    def __init__(self):
        self.embedder = SlowLoadingEmbedder()

    @hookimpl
    def register_embedders(self, register):
        register("slow", lambda runtime, options: self.embedder)


def test_a_recall_during_the_load_uses_bm25_alone_and_the_next_one_is_hybrid(make_runtime, caplog):
    slow = SlowPlugin()
    runtime = make_runtime(
        {"episodic": plugin, "slow": slow},
        config={"thoth": {"deadline": 0.6}, "plugins": {"episodic": {"embedder": "slow"}}},
    )
    memory = memory_for(runtime)
    memory.store.add([Episode(workspace="w", peer="ann", thread="t", user="my violin lesson moved to Thursday")])
    memory.warm_up()

    with caplog.at_level("INFO", logger="thoth_episodic.memory"):
        hits = memory.recall("violin lesson", workspace="w", peer="ann")
    assert [h.episode.user for h in hits] == ["my violin lesson moved to Thursday"]
    assert slow.embedder.calls == [] and "still loading" in caplog.text

    slow.embedder.loaded.set()
    memory._warm_up.join(5)
    assert memory.recall("violin lesson", workspace="w", peer="ann")
    assert ["violin lesson"] in slow.embedder.calls


class Restorer:
    """Restores thread `t`'s history at session start, as the working layer does for a resumed session."""

    @hookimpl
    def session_start(self, session):
        time.sleep(0.2)  # after the episodic layer's own hook has returned
        if session.thread == "t":
            session.history += [Message("user", "My violin lesson moved to Thursday."), Message("assistant", "Noted.")]


def runtime_with(make_runtime, slow: SlowPlugin):
    slow.embedder.loaded.set()
    plugins = {"episodic": plugin, "slow": slow, "restorer": Restorer()}
    return make_runtime(plugins, config={"plugins": {"episodic": {"embedder": "slow"}}})


async def test_the_model_loads_at_session_start_only_when_the_first_turn_will_recall(make_runtime):
    slow = SlowPlugin()
    runtime = runtime_with(make_runtime, slow)
    memory = memory_for(runtime)

    resumed = await runtime.session(peer="ann", thread="t")  # its next turn recalls nothing
    memory._warm_up.join(5)
    assert not memory.recalls(resumed) and slow.embedder.calls == []

    new = await runtime.session(peer="ann", thread="another")
    memory._warm_up.join(5)
    assert memory.recalls(new) and slow.embedder.calls == [["warm up"]]


async def test_a_resumed_session_whose_turn_recalls_after_all_loads_the_model_then(make_runtime):
    slow = SlowPlugin()
    runtime = runtime_with(make_runtime, slow)
    memory = memory_for(runtime)
    session = await runtime.session(peer="ann", thread="t")
    memory._warm_up.join(5)
    assert slow.embedder.calls == []

    session.history.clear()  # as a frontend starting the thread over does
    await runtime.turn("when is the violin lesson", peer="ann", thread="t")
    assert slow.embedder.calls[:2] == [["warm up"], ["when is the violin lesson"]]
