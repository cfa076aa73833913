"""A model-based test of the usearch index: random adds, forgets, supersedes, re-embeddings and reopenings.

After every step the index's dense answers equal exact search over the store's rows, no deleted row is
returned, every current row is found first by dense recall of its own vector in its scope, and no deleted
vector (float32 or float16) is left in any file beside the store. A reopening is a new process's handle.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from thoth_episodic import ann_search
from thoth_episodic.contract import episode, query
from thoth_episodic.scoring import candidate_count
from thoth_episodic.sqlite_store import SQLiteStore

pytestmark = pytest.mark.slow  # model-based run; each index write is an ann_writer process

DIM = 16
PEERS = ("ann", "bob", "cy")
K = 5


def unit(rng: np.random.Generator, count: int) -> np.ndarray:
    vectors = rng.standard_normal((count, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


class IndexAgreesWithTheStore(RuleBasedStateMachine):
    """The store (`ann = "usearch"`) is the model: its rows are read back with SQL to compute exact answers."""

    def __init__(self) -> None:
        super().__init__()
        self.small_scope, ann_search.SMALL_SCOPE = ann_search.SMALL_SCOPE, 0  # every scope through the index
        self.folder = Path(tempfile.mkdtemp(prefix="ann-model-"))
        self.db = self.folder / "e.db"
        self.store = SQLiteStore(self.db, dim=DIM, ann="usearch")
        self.rng = np.random.default_rng(0)
        self.forgotten: list[np.ndarray] = []
        self.written = 0

    def teardown(self) -> None:
        self.store.close()
        ann_search.SMALL_SCOPE = self.small_scope
        shutil.rmtree(self.folder, ignore_errors=True)

    def rows(self, where: str = "1", params: tuple = ()) -> list[tuple[int, str, np.ndarray]]:
        """(rowid, id, vector) of the matching rows with a vector (every version)."""
        with sqlite3.connect(self.db) as db:
            found = db.execute(
                f"SELECT rowid, id, embedding FROM episodes WHERE {where} AND embedding IS NOT NULL", params
            ).fetchall()
        return [(r, i, np.frombuffer(b, dtype=np.float32)) for r, i, b in found]

    @initialize(first=st.sampled_from(PEERS), then=st.sampled_from(PEERS), count=st.integers(1, 60))
    def two_peers(self, first: str, then: str, count: int) -> None:
        """Rows of one peer, then a few of another (the newest rowids, which a forget may take away)."""
        self.add(first, count)
        self.add(then, 3)

    @rule(peer=st.sampled_from(PEERS), count=st.integers(1, 60))
    def add(self, peer: str, count: int) -> None:
        items = [episode(f"row {self.written + i}", peer=peer) for i in range(count)]
        self.written += count
        self.store.add(items, unit(self.rng, count))

    @rule(peer=st.sampled_from(PEERS))
    def forget_peer(self, peer: str) -> None:
        self.forgotten += [v for _, _, v in self.rows("peer = ?", (peer,))]
        self.store.delete(workspace="w", peer=peer)

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def forget_some(self, data: st.DataObject) -> None:
        ids = sorted({i for _, i, _ in self.rows("superseded_at IS NULL")})
        if not ids:
            return
        picked = data.draw(st.lists(st.sampled_from(ids), min_size=1, max_size=20, unique=True))
        self.forgotten += [v for _, i, v in self.rows() if i in picked]
        self.store.delete(workspace="w", ids=picked)

    @precondition(lambda self: self.written)
    @rule(count=st.integers(1, 30))
    def forget_newest(self, count: int) -> None:
        """Forget the rows with the highest rowids (a rowid given again later would be one a file covered)."""
        with sqlite3.connect(self.db) as db:
            ids = [r[0] for r in db.execute("SELECT DISTINCT id FROM episodes ORDER BY rowid DESC LIMIT ?", (count,))]
        if ids:
            self.forgotten += [v for _, i, v in self.rows() if i in ids]
            self.store.delete(workspace="w", ids=ids)

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def supersede_one(self, data: st.DataObject) -> None:
        current = [(i, p) for i, p in self.ids_and_peers()]
        if current:
            episode_id, peer = data.draw(st.sampled_from(current))
            changed = episode(f"changed {episode_id}", peer=peer)
            changed.id = episode_id
            self.store.add([changed], unit(self.rng, 1))

    @precondition(lambda self: self.written)
    @rule(data=st.data())
    def re_embed(self, data: st.DataObject) -> None:
        current = [i for i, _ in self.ids_and_peers()]
        if current:
            picked = data.draw(st.lists(st.sampled_from(current), min_size=1, max_size=10, unique=True))
            self.store.set_vectors(picked, unit(self.rng, len(picked)))

    @rule()
    def compact(self) -> None:
        if self.store._index_ready:
            self.store._index.compact()

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = SQLiteStore(self.db, dim=DIM, ann="usearch")

    def ids_and_peers(self) -> list[tuple[str, str]]:
        with sqlite3.connect(self.db) as db:
            return db.execute("SELECT id, peer FROM episodes WHERE superseded_at IS NULL ORDER BY rowid").fetchall()

    @invariant()
    def dense_answers_equal_exact_search(self) -> None:
        probes = unit(np.random.default_rng(len(self.forgotten) + self.written), 3)
        for peer in PEERS:
            current = self.rows("peer = ? AND superseded_at IS NULL", (peer,))
            for probe in probes:
                assert self.store._usable_index() is not None
                found = [r for r, _, _ in self.store._indexed_dense(query("", probe, peer=peer, k=K), None)]
                exact = [r for r, _, v in sorted(current, key=lambda row: -float(row[2] @ probe))]
                assert found == exact[: candidate_count(K)]  # deleted rows are in neither

    @invariant()
    def every_current_row_is_found_by_its_own_vector(self) -> None:
        for peer in PEERS:
            for rowid, _, vector in self.rows("peer = ? AND superseded_at IS NULL", (peer,)):
                assert self.store._usable_index() is not None
                found = [r for r, _, _ in self.store._indexed_dense(query("", vector, peer=peer, k=1), None)]
                assert found[:1] == [rowid], (peer, rowid)

    @invariant()
    def no_forgotten_vector_in_any_file(self) -> None:
        if not self.forgotten:
            return
        for path in (p for p in self.folder.iterdir() if p.is_file() and ".usearch" in p.name):
            data = path.read_bytes()
            for vector in self.forgotten:
                assert data.find(vector.astype(np.float16).tobytes()[:16]) < 0, path.name


IndexAgreesWithTheStore.TestCase.settings = settings(
    max_examples=12, stateful_step_count=10, deadline=None, derandomize=True
)
test_the_index_agrees_with_the_store = IndexAgreesWithTheStore.TestCase


def test_a_re_embedded_row_waiting_for_the_file_is_a_candidate_once():
    """Found by the machine above: the file's stale copy and the pending new vector were both candidates."""
    state = IndexAgreesWithTheStore()
    try:
        state.dense_answers_equal_exact_search()  # builds the (empty) index
        state.add(peer="ann", count=48)
        state.compact()
        state.store.set_vectors([i for i, _ in state.ids_and_peers()][:7], unit(state.rng, 7))
        state.dense_answers_equal_exact_search()
    finally:
        state.teardown()


def test_an_edit_after_the_newest_peer_was_forgotten_is_found_after_compaction():
    """Issue 35 item 7 as the machine's steps: the new version took a rowid bob's rows had, below alice's mark."""
    state = IndexAgreesWithTheStore()
    try:
        state.add(peer="ann", count=40)
        state.add(peer="bob", count=5)  # the newest rowids
        state.every_current_row_is_found_by_its_own_vector()  # builds the files
        state.reopen()
        state.forget_peer(peer="bob")
        state.reopen()
        changed = episode("changed", peer="ann")
        changed.id = state.ids_and_peers()[0][0]
        state.store.add([changed], unit(state.rng, 1))
        state.compact()
        state.every_current_row_is_found_by_its_own_vector()
        state.dense_answers_equal_exact_search()
    finally:
        state.teardown()
