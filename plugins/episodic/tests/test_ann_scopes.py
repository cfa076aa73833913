"""One index file per scope (issue 35): forget of a peer deletes its files, forget of a thread rewrites only its own."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from thoth_episodic import ann_files, ann_index, ann_search
from thoth_episodic.contract import episode, query
from thoth_episodic.sqlite_store import SQLiteStore

DIM = 16


def unit(count: int, seed: int = 4) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def filled(path: Path, peers: tuple[str, ...], each: int) -> list:
    """`each` episodes per peer over three threads, in one indexed store."""
    store = SQLiteStore(path, dim=DIM, ann="exact")
    items = [episode(f"{p} row {i}", peer=p, thread=f"t{i % 3}") for i in range(each) for p in peers]
    store.add(items, unit(len(items)))
    store.close()
    return items


def identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def writer_started(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Records each start of an `ann_writer` child (they still run)."""
    started: list[bool] = []
    run = ann_index.AnnIndex._run_writer

    def counted(self, *args, **kwargs):
        started.append(True)
        return run(self, *args, **kwargs)

    monkeypatch.setattr(ann_index.AnnIndex, "_run_writer", counted)
    return started


def test_forget_of_a_peer_deletes_its_file_in_process_and_leaves_the_others_untouched(tmp_path, monkeypatch):
    db = tmp_path / "e.db"
    filled(db, ("ann", "bob", "cy"), 300)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.index_now()
    files = {p: ann_files.scope_paths(db, ("w", p, "default"))[0] for p in ("ann", "bob", "cy")}
    before = {p: identity(f) for p, f in files.items()}
    started = writer_started(monkeypatch)
    assert store.delete(workspace="w", peer="bob") == 300
    assert started == []  # no child: whole peers only lose files
    assert not files["bob"].exists() and not Path(f"{files['bob']}.json").exists()
    assert {p: identity(files[p]) for p in ("ann", "cy")} == {p: before[p] for p in ("ann", "cy")}
    assert ann_files.read_manifest(db)["generation"] == store._counter("generation")  # no full run owed
    assert store.search(query("", unit(1, seed=9)[0], peer="bob")) == []
    assert store.search(query("", unit(1, seed=9)[0], peer="ann"))
    store.close()


def test_forget_of_a_thread_rewrites_only_its_peers_file(tmp_path, monkeypatch):
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 0)
    db = tmp_path / "e.db"
    items = filled(db, ("ann", "bob"), 300)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.index_now()
    ann, bob = (ann_files.scope_paths(db, ("w", p, "default"))[0] for p in ("ann", "bob"))
    bob_before = identity(bob)
    gone = [i for i, e in enumerate(items) if e.peer == "ann" and e.thread == "t1"]
    assert store.delete(workspace="w", peer="ann", thread="t1") == len(gone) == 100
    assert identity(bob) == bob_before
    data = ann.read_bytes()
    vectors = unit(len(items))
    assert not [i for i in gone if data.find(vectors[i].astype(np.float16).tobytes()[:16]) >= 0]
    assert ann_files.sidecars(db)[("w", "ann", "default")]["count"] == 300  # 200 rows and 100 fillers
    assert ann_files.sidecars(db)[("w", "ann", "default")]["fillers"] == 100
    found = store.search(query("", vectors[gone[0]], peer="ann", k=3))
    assert found and all(hit.episode.thread != "t1" for hit in found)
    store.close()


def test_auto_gives_files_only_to_scopes_past_small_scope(tmp_path, monkeypatch):
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 250)
    db = tmp_path / "e.db"
    store = SQLiteStore(db, dim=DIM, ann="exact")
    big = [episode(f"big {i}", peer="big") for i in range(300)]
    small = [episode(f"small {i}", peer="small") for i in range(50)]
    store.add(big + small, unit(350))
    store.close()
    store = SQLiteStore(db, dim=DIM, ann="auto", ann_min_rows=100)
    store.index_now()
    assert set(ann_files.sidecars(db)) == {("w", "big", "default")}
    assert store.search(query("", unit(350)[320], peer="small", k=1))[0].episode.id == small[20].id  # exact
    store.add([episode(f"small late {i}", peer="small") for i in range(250)], unit(250, seed=5))
    store._index.compact()  # the scope grew past the size: it gets its file
    assert set(ann_files.sidecars(db)) == {("w", "big", "default"), ("w", "small", "default")}
    store.close()


def test_a_supersede_is_compacted_in_its_scope_only(tmp_path):
    db = tmp_path / "e.db"
    items = filled(db, ("ann", "bob"), 200)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.index_now()
    ann, bob = (ann_files.scope_paths(db, ("w", p, "default"))[0] for p in ("ann", "bob"))
    bob_before = identity(bob)
    changed = episode("a changed text", peer="ann")
    changed.id = items[0].id
    store.add([changed], unit(1, seed=8))
    store._index.compact()
    manifest = ann_files.read_manifest(db)
    assert manifest["generation"] == store._counter("generation") and identity(bob) == bob_before
    assert ann_files.sidecars(db)[("w", "ann", "default")]["count"] == 200  # the new version in, the old out
    store.close()


def test_a_file_deleted_by_another_process_is_served_exactly_and_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 0)
    db = tmp_path / "e.db"
    items = filled(db, ("ann", "bob"), 150)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.index_now()
    file = ann_files.scope_paths(db, ("w", "ann", "default"))[0]
    os.unlink(file)  # as a forget in an `ann = "exact"` process does
    hit = store.search(query("", unit(len(items))[10], peer="ann", k=1))[0]
    assert hit.episode.id == items[10].id
    store._index.wait()  # the compaction it started
    assert file.exists() and ann_files.sidecars(db)[("w", "ann", "default")]["count"] == 150
    store.close()
