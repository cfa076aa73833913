"""A rowid is never given twice (issue 35 re-measurement, items 7 and 8): the index files' covered marks stay true.

Without `AUTOINCREMENT`, a row stored after a forget of the newest rows took a rowid an index file already
claimed to cover: the writer kept that file, the edited episode never entered it, and dense recall missed
it; `thoth doctor` counted rows written after a file's mark as missing. Each handle below stands for one
`thoth` command (its own process in the repro).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import numpy as np
import pytest
from thoth_episodic import ann_files, ann_search
from thoth_episodic.ann_writer import FILLER_KEYS, Writer
from thoth_episodic.contract import episode, query
from thoth_episodic.sqlite_schema import MIGRATIONS
from thoth_episodic.sqlite_store import SQLiteStore
from usearch.index import Index

from thoth_core.storage import connect, migrate
from thoth_core.testing import run_thoth

DIM = 16
ALICE, DAVE = ("w", "alice", "default"), ("w", "dave", "default")


@pytest.fixture(autouse=True)
def index_every_scope(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small test scopes would be scored exactly; send them through the index (the repro's had 2,100 rows)."""
    monkeypatch.setattr(ann_search, "SMALL_SCOPE", 0)


def unit(count: int, seed: int = 4) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def rowid_of(db: Path, episode_id: str) -> int:
    with sqlite3.connect(db) as raw:
        return int(
            raw.execute("SELECT rowid FROM episodes WHERE id = ? AND superseded_at IS NULL", (episode_id,)).fetchone()[
                0
            ]
        )


def dense(store: SQLiteStore, vector: np.ndarray, peer: str = "alice") -> list[int]:
    assert store._usable_index() is not None
    return [r for r, _, _ in store._indexed_dense(query("", vector, peer=peer, k=5), None)]


def saved_keys(db: Path, scope: tuple[str, str, str]) -> set[int]:
    index = Index.restore(str(ann_files.scope_paths(db, scope)[0]))
    return {int(k) for k in index.keys if k < FILLER_KEYS}


def imported(db: Path, alice: int = 60, dave: int = 5) -> list:
    """`thoth episodes import`: alice's episodes, then dave's (the newest rowids), indexed."""
    items = [episode(f"alice {i}", peer="alice") for i in range(alice)]
    items += [episode(f"dave {i}", peer="dave") for i in range(dave)]
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.add(items, unit(len(items)))
    store.index_now()
    store.close()
    return items


def forgotten(db: Path, peer: str = "dave") -> None:
    """`thoth forget --peer dave`."""
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    store.delete(workspace="w", peer=peer)
    store.close()


def test_an_edit_after_the_newest_rows_were_forgotten_is_found_by_dense_recall(tmp_path):
    db = tmp_path / "e.db"
    items = imported(db)
    forgotten(db)
    edited = episode("grandmother's wild yeast bread", peer="alice")
    edited.id = items[0].id
    vector = unit(1, seed=9)
    store = SQLiteStore(db, dim=DIM, ann="usearch")  # `thoth episodes import changed.jsonl`
    assert [e.id for e in store.add([edited], vector)] == [items[0].id]
    store.index_now()
    store.close()

    new = rowid_of(db, items[0].id)
    store = SQLiteStore(db, dim=DIM, ann="usearch")  # `thoth recall`
    try:
        assert dense(store, vector[0])[0] == new
        assert new > len(items)  # after every rowid ever given (dave's too), not one of dave's again
        assert new in saved_keys(db, ALICE)  # the writer added it, it did not keep the old file
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
    finally:
        store.close()


def test_rows_written_after_a_forget_are_pending_not_missing_for_doctor(tmp_path):
    """Item 8: a forget, then an ordinary turn's write (no save of the files): doctor says the files agree."""
    db = tmp_path / "e.db"
    imported(db)
    forgotten(db)
    store = SQLiteStore(db, dim=DIM, ann="exact")  # a turn's write: the files are not saved
    store.add([episode(f"alice later {i}", peer="alice") for i in range(3)], unit(3, seed=11))
    store.close()
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    try:
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
        for i, vector in enumerate(unit(3, seed=11)):  # and recall finds them (pending rows, scored exactly)
            assert store.search(query("", vector, peer="alice", k=1))[0].episode.user == f"alice later {i}"
    finally:
        store.close()


def test_vectors_set_after_the_save_are_pending_not_missing_for_doctor(tmp_path):
    db = tmp_path / "e.db"
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    late = [episode(f"embedded later {i}", peer="alice") for i in range(4)]
    store.add(late)  # stored before the embedder gave their vectors
    store.add([episode(f"alice {i}", peer="alice") for i in range(20)], unit(20))
    store.index_now()
    store.close()
    writer = SQLiteStore(db, dim=DIM, ann="exact")  # the background embedder of another process
    writer.set_vectors([e.id for e in late], unit(4, seed=12))
    writer.close()
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    try:
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
        store._index.compact()
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
        assert {rowid_of(db, e.id) for e in late} <= saved_keys(db, ALICE)
    finally:
        store.close()


def test_a_row_missing_from_its_file_is_still_bad_for_doctor(tmp_path):
    db = tmp_path / "e.db"
    imported(db)
    path, sidecar = ann_files.scope_paths(db, ALICE)
    index = Index.restore(str(path))  # a row the file claims, taken out of it behind the writer's back
    index.remove(int(max(index.keys)))
    index.add(FILLER_KEYS, unit(1, seed=13)[0])  # a filler takes its slot: the file has no removed one
    index.save(str(path))
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "fillers": 1, "bytes": path.stat().st_size}))
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    try:
        [(ok, line)] = store.index_checks()
        assert not ok and "0 deleted rows still in them, 1 current rows missing from them" in line
    finally:
        store.close()


def test_leftover_files_under_exact_are_one_line_unused_not_bad(tmp_path):
    db = tmp_path / "e.db"
    imported(db)
    forgotten(db)
    store = SQLiteStore(db, dim=DIM, ann="exact")
    store.add([episode("alice after the switch", peer="alice")], unit(1, seed=14))  # the files never see it
    try:
        [(ok, line)] = store.index_checks()
        assert ok is True and line.startswith(f'episodic: ANN index {db}.usearch: unused (ann = "exact"); 3 files, ')
        assert f"delete {db.name}.usearch* to free them" in line
    finally:
        store.close()


def test_the_repro_through_the_cli_leaves_doctor_content(tmp_path):
    """Item 7's commands on a small home: import, forget the newest peer, import an edit, doctor."""
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"reply": "ok"}]))
    for key, value in (
        ("thoth.model", "replay"),
        ("models.replay.file", str(replies)),
        ("plugins.episodic.ann", "usearch"),
    ):
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
    now = time.time() - 3600
    rows = [("alice", i, f"alice item {i}: I worry about espresso, ref {i}") for i in range(30)]
    rows += [("dave", i, f"dave item {i}: the garden") for i in range(5)]
    big, changed = tmp_path / "big.jsonl", tmp_path / "changed.jsonl"
    big.write_text(
        "".join(
            json.dumps(
                {
                    "workspace": "default",
                    "peer": p,
                    "thread": "t0",
                    "user": text,
                    "id": f"ep_{p}_{i:05d}",
                    "occurred_at": now + i,
                    "recorded_at": now + i,
                }
            )
            + "\n"
            for p, i, text in rows
        )
    )
    changed.write_text(
        json.dumps(
            {
                "workspace": "default",
                "peer": "alice",
                "thread": "t0",
                "id": "ep_alice_00000",
                "user": "My grandmother taught me to bake bread with a wild yeast starter",
                "occurred_at": now,
                "recorded_at": time.time(),
            }
        )
        + "\n"
    )
    env = {"THOTH_HOME": None, "THOTH_CONFIG": None}
    for command in (
        ("episodes", "import", str(big)),
        ("forget", "--peer", "dave"),
        ("episodes", "import", str(changed)),
    ):
        done = run_thoth(*command, cwd=home, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
    doctor = run_thoth("doctor", cwd=home, env=env, timeout=120)
    lines = [line for line in doctor.stdout.splitlines() if "ANN index" in line]
    assert len(lines) == 1 and lines[0].startswith("ok ") and lines[0].endswith("agrees with the store"), doctor.stdout
    db = home / ".thoth" / "episodic" / "episodes.db"
    assert rowid_of(db, "ep_alice_00000") == 36  # 30 alice + 5 dave were 1-35: never one of dave's again


# --- an older store (user_version 4, plain INTEGER PRIMARY KEY) -------------------------------------------------------


def insert(
    raw: sqlite3.Connection, episode_id: str, peer: str, text: str, vector: np.ndarray, rowid: int | None = None
) -> int:
    """A row as the older release stored it (no rowid given: the largest plus one)."""
    cursor = raw.execute(
        "INSERT INTO episodes (rowid, id, workspace, peer, thread, user, occurred_at, recorded_at, embedding, "
        "vector_version) VALUES (?, ?, 'w', ?, 't1', ?, 1699000000, 1699000000, ?, 1)",
        (rowid, episode_id, peer, text, vector.astype(np.float32).tobytes()),
    )
    raw.execute(
        "INSERT INTO episodes_fts (rowid, body, context, dates) VALUES (?, ?, '', '')", (cursor.lastrowid, text)
    )
    return int(cursor.lastrowid)


def old_store(db: Path, *, edited: bool) -> dict[int, str]:
    """A store of the release before migration 5, indexed: alice 1-30, dave 31-35, then dave forgotten.

    `edited`: then alice's first episode edited as that release did, its new version taking rowid 31, which
    alice's file then claimed without holding it (the writer kept the file: same count). Returns rowid -> id.
    """
    raw = connect(db)
    migrate(raw, MIGRATIONS[:4])
    vectors = VECTORS
    for i in range(35):
        peer = "alice" if i < 30 else "dave"
        insert(raw, f"ep_{peer}_{i}", peer, f"{peer} row {i} about pianos", vectors[i], i + 1)
    raw.execute("UPDATE meta SET value = '1' WHERE key = 'vectors'")
    Writer(db, DIM).run(rebuild=True, scopes=[], generations=set())
    raw.execute("DELETE FROM episodes_fts WHERE rowid > 30")  # `thoth forget --peer dave`
    raw.execute("DELETE FROM episodes WHERE rowid > 30")
    raw.execute("UPDATE meta SET value = '1' WHERE key = 'generation'")
    Writer(db, DIM).run(rebuild=False, scopes=[DAVE], generations={1})
    if edited:
        raw.execute("UPDATE episodes SET superseded_at = 1699000001 WHERE rowid = 1")
        assert insert(raw, "ep_alice_0", "alice", "the violin lesson", vectors[35]) == 31  # a rowid reused
        raw.execute("UPDATE meta SET value = '2' WHERE key = 'generation'")
        done = Writer(db, DIM).run(rebuild=False, scopes=[ALICE], generations={2})
        assert done["scopes"] == {"kept": 1} and 31 not in saved_keys(db, ALICE)  # the damage of issue 35
    mapping = dict(raw.execute("SELECT rowid, id FROM episodes").fetchall())
    raw.close()
    return mapping


VECTORS = unit(36, seed=21)


def schema_of(db: Path) -> tuple[str, set[str], tuple[int, ...] | None]:
    with sqlite3.connect(db) as raw:
        sql = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'episodes'").fetchone()[0]
        names = {
            r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE tbl_name = 'episodes' AND type = 'index'")
        }
        autoincrement = "AUTOINCREMENT" in sql
        sequence = (
            raw.execute("SELECT seq FROM sqlite_sequence WHERE name = 'episodes'").fetchone() if autoincrement else None
        )
    return sql, names, sequence


def test_an_older_store_keeps_its_rowids_and_full_text_and_never_reuses_a_covered_rowid(tmp_path):
    db = tmp_path / "e.db"
    before = old_store(db, edited=False)
    _, indexes, _ = schema_of(db)
    assert json.loads(ann_files.scope_paths(db, ALICE)[1].read_text())["rowid"] == 35  # dave's rows were 31-35
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    try:
        with sqlite3.connect(db) as raw:
            assert raw.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),) == (5,)
            assert dict(raw.execute("SELECT rowid, id FROM episodes").fetchall()) == before  # rowids kept
            assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        sql, names, sequence = schema_of(db)
        assert "AUTOINCREMENT" in sql and names == indexes and sequence == (35,)
        assert [h.episode.id for h in store.search(query("pianos row 7", peer="alice", k=1))] == ["ep_alice_7"]
        added = store.add([episode("a new row after the migration", peer="alice")], unit(1, seed=22))
        assert rowid_of(db, added[0].id) == 36  # not 31, which alice's file claims to cover
        assert dense(store, unit(1, seed=22)[0])[0] == 36
        store._index.compact()
        assert saved_keys(db, ALICE) == set(range(1, 31)) | {36}
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
        store.delete(workspace="w", ids=[added[0].id])
        again = store.add([episode("and another", peer="alice")], unit(1, seed=23))
        assert rowid_of(db, again[0].id) == 37
    finally:
        store.close()


def test_an_older_store_whose_file_missed_a_reused_rowid_gets_it_back(tmp_path):
    db = tmp_path / "e.db"
    before = old_store(db, edited=True)
    store = SQLiteStore(db, dim=DIM, ann="usearch")
    try:
        with sqlite3.connect(db) as raw:
            assert dict(raw.execute("SELECT rowid, id FROM episodes").fetchall()) == before
        assert [h.episode.id for h in store.search(query("violin", peer="alice", k=1))] == ["ep_alice_0"]
        # the file's mark is lowered below the row it missed: pending again, found, and the next save adds it
        assert json.loads(ann_files.scope_paths(db, ALICE)[1].read_text())["rowid"] == 30
        assert dense(store, VECTORS[35])[0] == 31
        assert store.index_checks() == [(True, f"episodic: ANN index {db}.usearch: agrees with the store")]
        store._index.compact()
        assert saved_keys(db, ALICE) == set(range(2, 32))
        assert rowid_of(db, store.add([episode("next", peer="alice")], unit(1, seed=24))[0].id) == 32
    finally:
        store.close()


def test_a_fresh_store_never_reuses_a_rowid(tmp_path):
    db = tmp_path / "e.db"
    store = SQLiteStore(db, dim=DIM)
    try:
        first = store.add([episode(f"row {i}") for i in range(3)], unit(3))
        store.delete(workspace="w", ids=[first[-1].id])
        assert rowid_of(db, store.add([episode("row 3")], unit(1, seed=5))[0].id) == 4
    finally:
        store.close()


def test_postgres_never_gives_a_rowid_twice(pg_dsn):
    """PostgreSQL's rowid is a BIGSERIAL (a sequence never goes back) and its HNSW index lives in the table."""
    import psycopg
    from thoth_episodic.postgres_store import PostgresStore

    store = PostgresStore(pg_dsn, dim=DIM)
    try:
        first = store.add([episode(f"row {i}", peer="alice") for i in range(3)], unit(3))
        store.delete(workspace="w", ids=[first[-1].id])
        later = store.add([episode("after the forget", peer="alice")], unit(1, seed=5))
    finally:
        store.close()
    with psycopg.connect(pg_dsn) as db:
        rowids = dict(db.execute("SELECT id, rowid FROM thoth_episodes").fetchall())
    assert rowids[later[0].id] == 4 and len(rowids) == 3
