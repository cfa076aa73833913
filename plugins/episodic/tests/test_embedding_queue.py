"""The embedding queue on its own, with a store that records what it is asked."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time

import numpy as np
from thoth_episodic.embedding_queue import EmbeddingQueue
from thoth_episodic.records import Episode
from thoth_episodic.sqlite_store import SQLiteStore


class RecordingStore:
    def __init__(self, unembedded=()):
        self.stored: list[tuple[str, float]] = []
        self.asked_before: list[float | None] = []
        self._unembedded = list(unembedded)

    def unembedded(self, *, limit, recorded_before=None):
        self.asked_before.append(recorded_before)
        return [e for e in self._unembedded if recorded_before is None or e.recorded_at < recorded_before][:limit]

    def set_vectors(self, ids, vectors):
        self.stored += [(i, float(v[0])) for i, v in zip(ids, vectors, strict=True)]
        self._unembedded = [e for e in self._unembedded if e.id not in ids]


def fake_embed(texts):
    """A vector whose first value says which text it came from."""
    return np.array([[float(len(t))] + [0.0] * 3 for t in texts], dtype=np.float32)


def test_a_text_queued_again_while_the_first_is_embedded_gets_its_own_vector():
    store, gate, started = RecordingStore(), threading.Event(), threading.Event()

    def gated(texts):
        started.set()
        assert gate.wait(10)
        return fake_embed(texts)

    queue = EmbeddingQueue(lambda: store, gated)
    queue.put("ep_a", "first")
    assert started.wait(10)  # "first" is being embedded
    queue.put("ep_a", "the second text")
    gate.set()
    assert queue.join(timeout=10)
    assert store.stored == [("ep_a", 5.0), ("ep_a", 15.0)]  # the newer text's vector lands last
    queue.close()


def test_the_backfill_leaves_episodes_recorded_after_the_queue_started_to_their_writer():
    earlier = Episode(workspace="w", peer="ann", thread="t", user="left by a killed process")
    earlier.recorded_at = time.time() - 60
    store = RecordingStore([earlier])
    queue = EmbeddingQueue(lambda: store, fake_embed)
    later = Episode(workspace="w", peer="ann", thread="t", user="written by another process just now")
    later.recorded_at = time.time() + 1
    store._unembedded.append(later)
    queue.backfill()
    assert queue.join(timeout=10)
    assert [i for i, _ in store.stored] == [earlier.id] and queue.backfilled == 1
    assert all(before is not None and before < later.recorded_at for before in store.asked_before)
    queue.close()


def test_a_store_that_cannot_be_written_is_one_warning_line_and_its_episodes_wait(tmp_path, caplog):
    """Item 9: a read-only data folder (SQLite says so on the write), or a store that cannot even be opened."""
    store = SQLiteStore(tmp_path / "e.db", dim=4)
    waiting = Episode(workspace="w", peer="ann", thread="t", user="kept without a vector")
    store.add([waiting])
    store._db.execute("PRAGMA query_only = ON")  # every write now fails as in a read-only folder
    queue = EmbeddingQueue(lambda: store, fake_embed)
    with caplog.at_level(logging.WARNING, logger="thoth_episodic"):
        queue.put(waiting.id, waiting.user)
        assert queue.join(timeout=10, backfill=False)
    queue.close()
    assert [(r.levelno, r.exc_info, r.getMessage()) for r in caplog.records] == [
        (
            logging.WARNING,
            None,
            "episodic: 1 episodes wait for a vector (they are embedded at the next start): "
            "OperationalError: attempt to write a readonly database",
        )
    ]
    store._db.execute("PRAGMA query_only = OFF")
    assert [e.id for e in store.unembedded(limit=5)] == [waiting.id]  # nothing lost: the next start embeds it
    store.close()

    caplog.clear()

    def unopenable():
        raise sqlite3.OperationalError("unable to open database file")

    queue = EmbeddingQueue(unopenable, fake_embed)
    with caplog.at_level(logging.WARNING, logger="thoth_episodic"):
        queue.backfill()
        assert queue.join(timeout=10)
    queue.close()
    assert [(r.exc_info, r.getMessage()) for r in caplog.records] == [
        (
            None,
            "episodic: stored episodes wait for a vector (they are embedded at the next start): "
            "OperationalError: unable to open database file",
        )
    ]
