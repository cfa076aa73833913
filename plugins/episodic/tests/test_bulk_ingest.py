"""Bulk writes run at the embedding model's pace: batched embedding, one commit per batch, embedding overlapped."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from thoth_episodic import bundle, plugin
from thoth_episodic.contract import unit
from thoth_episodic.embedding_queue import batches, pipelined
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode

from thoth_core import hookimpl


class BatchRecordingEmbedder:
    """Fixed vectors; remembers the size of every call."""

    name = "recording"
    dim = 384

    def __init__(self):
        self.calls: list[int] = []

    def embed(self, texts):
        self.calls.append(len(texts))
        return np.stack([unit(len(text)) for text in texts])


class RecordingPlugin:
    def __init__(self):
        self.embedder = BatchRecordingEmbedder()

    @hookimpl
    def register_embedders(self, register):
        register("recording", lambda runtime, options: self.embedder)


def recording_memory(make_runtime):
    recording = RecordingPlugin()
    runtime = make_runtime(
        {"episodic": plugin, "recording": recording}, config={"plugins": {"episodic": {"embedder": "recording"}}}
    )
    return memory_for(runtime), recording.embedder


def transactions(memory) -> list[str]:
    """Record every transaction the store's connection begins from now on."""
    begun: list[str] = []
    memory.store._db.set_trace_callback(lambda sql: begun.append(sql) if sql.startswith("BEGIN") else None)
    return begun


def episodes(count, workspace="w"):
    return [
        Episode(workspace=workspace, peer="ann", thread=f"t{i // 20}", user=f"turn {i} about cats")
        for i in range(count)
    ]


def test_an_import_embeds_in_batches_and_commits_once_per_batch(make_runtime):
    memory, embedder = recording_memory(make_runtime)
    begun = transactions(memory)
    assert memory.write_many(episodes(600), batch=256) == 600
    assert embedder.calls == [256, 256, 88]  # not one text at a time
    assert len(begun) == 3  # not one transaction per episode
    assert memory.store.count() == 600
    assert memory.store.unembedded(limit=1) == []


def test_a_re_import_embeds_only_what_the_store_does_not_hold_and_counts_every_episode(make_runtime):
    memory, embedder = recording_memory(make_runtime)
    every = episodes(310)
    memory.write_many(every[:300])
    embedder.calls.clear()
    done: list[int] = []
    assert memory.write_many(every, progress=done.append) == 10
    assert embedder.calls == [10] and sum(done) == 310


def test_a_bundle_import_streams_its_records_through_the_batched_write_path(make_runtime):
    memory, embedder = recording_memory(make_runtime)
    begun = transactions(memory)
    records = (e.to_dict() for e in episodes(2 * bundle.BATCH + 5))
    section = {"name": bundle.SECTION, "version": bundle.VERSION, "records": records}
    done: list[int] = []
    assert bundle.bundle_import(section=section, runtime=memory.runtime, progress=done.append) == {
        "episodes": 2 * bundle.BATCH + 5
    }
    assert embedder.calls == [bundle.BATCH, bundle.BATCH, 5]
    assert len(begun) == 3 and done == embedder.calls


def test_a_reindex_embeds_and_commits_per_batch(make_runtime):
    memory, embedder = recording_memory(make_runtime)
    memory.write_many(episodes(300))
    embedder.calls.clear()
    begun = transactions(memory)
    assert memory.reindex(batch=128) == 300
    assert embedder.calls == [128, 128, 44]
    assert len(begun) == 3


def test_a_burst_of_post_turn_writes_is_embedded_in_batches(make_runtime):
    memory, embedder = recording_memory(make_runtime)
    gate, first_call = threading.Event(), threading.Event()
    plain = embedder.embed

    def gated(texts):
        first_call.set()
        assert gate.wait(10)
        return plain(texts)

    embedder.embed = gated
    burst = episodes(101)
    memory.write(burst[0])
    assert first_call.wait(10)  # the queue is busy with the first episode while the rest arrive
    for episode in burst[1:]:
        memory.write(episode)
    gate.set()
    assert memory.flush(timeout=10)
    assert embedder.calls == [1, 32, 32, 32, 4]
    assert memory.store.unembedded(limit=1) == []


def test_the_next_batch_is_embedded_while_the_current_one_is_stored():
    second_embedding = threading.Event()
    stored: list[tuple[list[int], list[int]]] = []

    def embed(chunk):
        if chunk[0] == 3:
            second_embedding.set()
        return [10 * n for n in chunk]

    def store(chunk, vectors):
        if chunk[0] == 0:  # a sequential writer would embed the second batch only after this returns
            assert second_embedding.wait(10), "the second batch was not embedded during the first one's commit"
        stored.append((chunk, vectors))
        return len(chunk)

    assert pipelined(batches(range(7), 3), embed, store) == 7
    assert stored == [([0, 1, 2], [0, 10, 20]), ([3, 4, 5], [30, 40, 50]), ([6], [60])]


def test_a_failing_embedding_stops_the_pipeline_before_its_batch_is_stored():
    stored: list[list[int]] = []

    def embed(chunk):
        if chunk[0] == 3:
            raise RuntimeError("model broke")
        return chunk

    with pytest.raises(RuntimeError, match="model broke"):
        pipelined(batches(range(9), 3), embed, lambda chunk, vectors: stored.append(chunk) or len(chunk))
    assert stored == [[0, 1, 2]]
