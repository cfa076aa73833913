"""The usearch HNSW index behind `ann = "usearch"` / `"auto"`: recall, persistence, rebuilds, forgetting, scope."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from thoth_episodic import ann_files, ann_index, ann_search, ann_writer
from thoth_episodic.contract import StoreContract, episode, query
from thoth_episodic.sqlite_store import SQLiteStore
from usearch.index import Index

from thoth_core.config import ConfigError
from thoth_core.testing import make_test_runtime

DIM = 32
ANN = ("w", "ann", "default")  # the scope of the contract's episodes and queries


@pytest.fixture(autouse=True)
def index_every_scope(monkeypatch):
    """Small test scopes would be scored exactly; send them through the index."""
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 0)


def clustered(count: int, seed: int = 3, clusters: int = 60) -> np.ndarray:
    """Unit vectors around a few random centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, DIM)).astype(np.float32)
    vectors = centres[rng.integers(0, clusters, count)] + 0.35 * rng.standard_normal((count, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def fill(path: Path, vectors: np.ndarray, *, peer: str = "ann") -> list:
    store = SQLiteStore(path, dim=DIM, ann="exact")
    items = [episode(f"episode {peer} {i}", peer=peer) for i in range(len(vectors))]
    store.add(items, vectors)
    store.close()
    return items


def dense_ids(store: SQLiteStore, vector: np.ndarray, **kwargs) -> list[int]:
    q = query("", vector, k=10, **kwargs)
    if store.ann == "exact":
        cache = store.refresh()
        return [r for r, _, _ in store._dense(cache, q, store._visible(cache, q, None))[:10]]
    assert store._usable_index() is not None  # builds it when missing
    return [r for r, _, _ in store._indexed_dense(q, None)[:10]]


def top_id(store: SQLiteStore, vector: np.ndarray, **kwargs) -> str:
    return store.search(query("", vector, k=3, **kwargs))[0].episode.id


def saved_keys(path: Path) -> set[int]:
    """Rowids in the saved files of every scope (fillers, which hold removed rows' slots, left out)."""
    return {
        int(k)
        for file in ann_files.scope_files(path)
        for k in Index.restore(str(file)).keys
        if k < ann_writer.FILLER_KEYS
    }


def test_dense_recall_at_10_matches_exact_search_on_clustered_vectors(tmp_path):
    vectors = clustered(4000)
    fill(tmp_path / "e.db", vectors)
    exact = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="exact")
    indexed = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    rng = np.random.default_rng(9)
    overlaps = []
    for i in rng.integers(0, len(vectors), 40):
        probe = vectors[i] + 0.1 * rng.standard_normal(DIM).astype(np.float32)
        probe /= np.linalg.norm(probe)
        overlaps.append(len(set(dense_ids(indexed, probe)) & set(dense_ids(exact, probe))) / 10)
    assert len(indexed._index) == 4000 and np.mean(overlaps) >= 0.98


def test_every_row_is_reachable_as_its_own_nearest_neighbour(tmp_path):
    """Concurrent inserts strand a few nodes (usearch #735): on two threads six builds of six failed."""
    fill(tmp_path / "e.db", clustered(5000))
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert store._usable_index() is not None
    rows = store._db.execute("SELECT rowid, embedding FROM episodes").fetchall()
    keys = np.array([r for r, _ in rows])
    found = (
        store._index.scope_index(ANN).search(np.stack([np.frombuffer(b, dtype=np.float32) for _, b in rows]), 10).keys
    )
    assert [int(k) for k, near in zip(keys, found, strict=True) if k not in near] == []


def test_the_index_is_saved_beside_the_store_and_rows_added_since_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(ann_index, "ROWS_PER_BEAM_STEP", 10)  # the search beam: 2,000 rows 200, 3,000 rows 256 at most
    vectors = clustered(3000)
    fill(tmp_path / "e.db", vectors[:2000])
    first = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    first.search(query("", vectors[0]))  # builds and saves
    first.close()
    assert ann_files.scope_paths(tmp_path / "e.db", ANN)[0].exists() and len(saved_keys(tmp_path / "e.db")) == 2000
    late = fill(tmp_path / "e.db", vectors[2000:], peer="ann")

    reopened = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert reopened._index_ready and len(reopened._index) == 2000  # mapped from the file, not rebuilt
    assert reopened._index.scope_index(ANN).expansion_search == 200  # the beam for its size, not the file's default
    assert top_id(reopened, vectors[2500]) == late[500].id  # a pending row, scored from SQLite
    reopened._index.compact()
    assert len(reopened._index) == 3000 and not reopened._index.pending
    assert reopened._index.scope_index(ANN).expansion_search == 256  # the compacted file too, up to the configured beam
    assert top_id(reopened, vectors[2500]) == late[500].id
    reopened.close()
    assert len(saved_keys(tmp_path / "e.db")) == 3000


def test_candidates_come_nearest_first_with_pending_rows_among_them(tmp_path):
    vectors = clustered(2100)
    fill(tmp_path / "e.db", vectors[:2000])
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    store.search(query("", vectors[0]))  # builds the index
    fill(tmp_path / "e.db", vectors[2000:])  # pending: stored after the build
    store._index.catch_up(store._db)
    probe = vectors[2050]
    keys = store._index.candidates(probe, 100, ANN)
    similarity = {
        int(r): float(np.frombuffer(b, dtype=np.float32) @ probe)
        for r, b in store._db.execute("SELECT rowid, embedding FROM episodes")
    }
    assert int(keys[0]) == 2051 and len(keys) == 100  # the pending row itself, ahead of every indexed one
    assert np.all(np.diff([similarity[int(k)] for k in keys]) <= 1e-3)  # f16 index distances: nearly sorted


def test_a_scope_sharing_the_store_gets_the_same_dense_top_as_exact_search(tmp_path, monkeypatch):
    """Candidates outside the scope fail the check of the nearest n, and the rest are read (no exact fallback)."""
    vectors = clustered(3000)
    fill(tmp_path / "e.db", vectors[::2], peer="ann")
    fill(tmp_path / "e.db", vectors[1::2], peer="bob")
    exact = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="exact")
    indexed = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    top = [dense_ids(exact, v) for v in vectors[:300:10]]
    monkeypatch.setattr(ann_search, "scope_exact", None)
    overlaps = [len(set(dense_ids(indexed, v)) & set(t)) / 10 for v, t in zip(vectors[:300:10], top, strict=True)]
    assert np.mean(overlaps) >= 0.98


@pytest.mark.parametrize("damage", ["missing", "corrupt", "sidecar", "manifest"])
def test_a_missing_or_corrupt_index_is_rebuilt(tmp_path, caplog, damage):
    vectors = clustered(1500)
    items = fill(tmp_path / "e.db", vectors)
    SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch").search(query("", vectors[0]))
    file, sidecar = ann_files.scope_paths(tmp_path / "e.db", ANN)
    target = {"corrupt": file, "sidecar": sidecar, "manifest": ann_files.manifest_path(tmp_path / "e.db")}.get(damage)
    if target is None:  # every index file gone, as when a person deletes them
        for path in tmp_path.glob("e.db.usearch*"):
            path.unlink()
    else:
        target.write_bytes(b"not an index")
    with caplog.at_level(logging.WARNING, logger="thoth_episodic.ann_index"):
        store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert not store._index_ready
    assert len([r for r in caplog.records if "rebuilding the ANN index" in r.message]) == (damage != "missing")
    assert top_id(store, vectors[700]) == items[700].id and len(store._index) == 1500
    assert len(saved_keys(tmp_path / "e.db")) == 1500


def test_forget_removes_the_vector_from_the_index_and_its_file(tmp_path):
    vectors = clustered(2000)
    items = fill(tmp_path / "e.db", vectors)
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert top_id(store, vectors[42]) == items[42].id
    rowid = dense_ids(store, vectors[42])[0]
    assert store.delete(workspace="w", ids=[items[42].id]) == 1
    assert rowid not in saved_keys(tmp_path / "e.db") and len(saved_keys(tmp_path / "e.db")) == 1999  # at once
    assert rowid not in dense_ids(store, vectors[42]) and top_id(store, vectors[42]) != items[42].id
    store.close()


def test_a_row_forgotten_by_another_handle_is_never_returned_and_leaves_the_file(tmp_path):
    vectors = clustered(2000)
    items = fill(tmp_path / "e.db", vectors)
    reader = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    rowid = dense_ids(reader, vectors[7])[0]
    other = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="exact")
    other.delete(workspace="w", ids=[items[7].id])
    other.close()
    assert rowid in reader._index.scope_index(ANN) and rowid not in dense_ids(reader, vectors[7])
    reader._index.compact()  # the generation moved: rows gone from SQLite leave the index
    assert rowid not in saved_keys(tmp_path / "e.db")
    reader.close()


def test_a_delete_by_a_handle_not_using_the_index_deletes_the_file(tmp_path):
    """`ann = "exact"` does not keep the files up to date: a forget there deletes the touched scope's file (the
    manifest, which holds no row, stays), and the next indexed handle rebuilds it."""
    vectors = clustered(1500)
    items = fill(tmp_path / "e.db", vectors)
    SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch").search(query("", vectors[0]))
    rowid = len(items)  # the last row
    exact = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="exact")
    exact.delete(workspace="w", ids=[items[-1].id])
    exact.close()
    left = [p.name for p in tmp_path.iterdir() if ".usearch" in p.name and not p.name.endswith(".lock")]
    assert left == ["e.db.usearch-scopes.json"]
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert top_id(store, vectors[3]) == items[3].id
    store.close()
    assert rowid not in saved_keys(tmp_path / "e.db") and len(saved_keys(tmp_path / "e.db")) == 1499


def test_scope_supersession_and_as_of_are_honoured(tmp_path):
    vectors = clustered(3000)
    mine = fill(tmp_path / "e.db", vectors[:1500], peer="ann")
    theirs = fill(tmp_path / "e.db", vectors[1500:], peer="bob")
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="usearch")
    assert top_id(store, vectors[1600]) in {e.id for e in mine}  # bob's nearest row is not ann's to see
    assert top_id(store, vectors[1600], peer="bob") == theirs[100].id
    assert store.search(query("", vectors[1600], agent="other")) == []
    old = mine[5]
    before = old.recorded_at + 1
    changed = episode("a changed text", peer="ann")
    changed.id = old.id
    store.add([changed], vectors[2999][None, :])  # supersedes the old version, with a far vector
    assert top_id(store, vectors[5]) != old.id
    assert top_id(store, vectors[5], as_of=before) == old.id  # as-of search is exact over every version
    store.close()


def test_auto_builds_in_the_background_from_min_rows_and_serves_exactly_meanwhile(tmp_path):
    vectors = clustered(1200)
    items = fill(tmp_path / "e.db", vectors)
    small = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="auto", ann_min_rows=5000)
    assert top_id(small, vectors[3]) == items[3].id and small._building is None
    small.close()
    store = SQLiteStore(tmp_path / "e.db", dim=DIM, ann="auto", ann_min_rows=1000)
    assert top_id(store, vectors[3]) == items[3].id  # exact while the build runs
    store._building.join()
    assert store._index_ready and top_id(store, vectors[4]) == items[4].id
    store.close()
    assert len(saved_keys(tmp_path / "e.db")) == 1200


def test_the_ann_setting_is_checked_at_start(tmp_path):
    from thoth_episodic import plugin

    with pytest.raises(
        ConfigError, match="plugins.episodic.ann: expected one of 'auto', 'exact', 'usearch', got 'ivf'"
    ):
        make_test_runtime(tmp_path, {"episodic": plugin}, config={"plugins": {"episodic": {"ann": "ivf"}}})


class TestIndexedSQLiteStore(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Callable[[], SQLiteStore]:
        return lambda: SQLiteStore(tmp_path / "episodes.db", ann="usearch")
