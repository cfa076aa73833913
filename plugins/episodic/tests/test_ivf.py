"""The opt-in IVF index: close to exact search, new rows found before a rebuild, scopes respected."""

from __future__ import annotations

import numpy as np
import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode, Query
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core import ConfigError
from thoth_core.testing import make_test_runtime


def clustered(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((50, 384)).astype(np.float32)
    vectors = centres[rng.integers(0, 50, n)] + 0.3 * rng.standard_normal((n, 384)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def episodes(n: int, peer: str = "ann") -> list[Episode]:
    return [
        Episode(workspace="w", peer=peer, thread="t", user=f"row {i}", occurred_at=1_700_000_000.0) for i in range(n)
    ]


def top_ids(store: SQLiteStore, vector: np.ndarray, peer: str = "ann") -> list[str]:
    return [h.episode.id for h in store.search(Query("zzz", "w", peer, k=10, vector=vector, tau_days=0))]


def test_ivf_recalls_what_exact_search_finds(tmp_path):
    vectors = clustered(3000, 1)
    items = episodes(3000)
    exact = SQLiteStore(tmp_path / "e.db")
    exact.add(items, vectors)
    approximate = SQLiteStore(tmp_path / "e.db", ann="ivf", ann_min_rows=1000, ann_nprobe=12)
    queries = clustered(40, 2)
    overlap = [len(set(top_ids(exact, q)) & set(top_ids(approximate, q))) / 10 for q in queries]
    assert approximate._cache.index is not None and len(approximate._cache.index.centroids) == 54
    assert np.mean(overlap) >= 0.95

    late = Episode(workspace="w", peer="ann", thread="t", user="added after the build", occurred_at=1_700_000_000.0)
    approximate.add([late], queries[:1] * 1.0)
    assert top_ids(approximate, queries[0])[0] == late.id and approximate._cache.index.size == 3000
    other = Episode(workspace="w", peer="bob", thread="t", user="bob's", occurred_at=1_700_000_000.0)
    approximate.add([other], queries[1:2])
    assert other.id not in top_ids(approximate, queries[1]) and top_ids(approximate, queries[1], "bob") == [other.id]
    index = approximate._cache.index
    exact.set_vectors([items[7].id], queries[2:3])  # a new vector (reindex, backfill) on an indexed row
    assert top_ids(approximate, queries[2])[0] == items[7].id and approximate._cache.index is index  # no rebuild
    exact.close()
    approximate.close()


def test_ann_setting_is_checked(tmp_path):
    runtime = make_test_runtime(tmp_path, {"episodic": plugin}, config={"plugins": {"episodic": {"ann": "hnsw"}}})
    with pytest.raises(ConfigError, match='plugins.episodic.ann: expected "ivf"'):
        memory_for(runtime).store
