"""The PostgreSQL backend's pgvector HNSW path: same hits as exact search, scope kept, fallback, pool, builds."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import psycopg
import pytest
from thoth_episodic.contract import DAY, NOW, episode, near, query, unit
from thoth_episodic.postgres_schema import hnsw_ddl, hnsw_state
from thoth_episodic.postgres_store import SCHEMA, PostgresStore


@pytest.fixture
def open_store(storage_url: str) -> Iterator[object]:
    """Opens stores on one fresh database (schema `thoth_episodic`, as `[storage] url` does); closes them after."""
    opened: list[PostgresStore] = []

    def make(**options: object) -> PostgresStore:
        opened.append(PostgresStore(storage_url, schema=SCHEMA, **options))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def sql(url: str, statement: str) -> list[tuple]:
    """Run one statement in the store's schema."""
    with psycopg.connect(url, autocommit=True, options=f"-c search_path={SCHEMA},public") as db:
        cursor = db.execute(statement)
        return cursor.fetchall() if cursor.description else []


def spread(count: int, seed: int, **fields: object) -> tuple[list, np.ndarray]:
    """`count` episodes with vectors spread over the sphere."""
    items = [episode(f"note {seed} {i}", **fields) for i in range(count)]
    return items, np.stack([unit(seed * 10_000 + i) for i in range(count)])


def ids(hits: list) -> list[str]:
    return [hit.episode.id for hit in hits]


def test_the_index_returns_the_top_hits_of_exact_search_on_a_clustered_set(open_store):
    indexed, exact = open_store(ann="hnsw"), open_store(ann="exact")
    centres = [unit(900 + c) for c in range(20)]
    items = [episode(f"clustered {c} {i}") for c in range(20) for i in range(30)]
    indexed.add(items, np.stack([near(centres[c], 1000 * c + i, 0.3) for c in range(20) for i in range(30)]))
    for c in range(0, 20, 2):
        asked = query("", near(centres[c], 7 + c, 0.2), k=5, tau_days=0)
        assert ids(indexed.search(asked)) == ids(exact.search(asked))
    assert indexed.dense.paths == {"hnsw": 10} and exact.dense.paths == {"exact": 10}


def test_the_index_never_returns_rows_outside_the_scope_even_the_nearest(open_store):
    store, exact = open_store(ann="hnsw"), open_store(ann="exact")
    target = unit(1)
    mine, vectors = spread(300, 2)
    old = episode("my old address", days_ago=3)
    store.add([*mine, old], np.concatenate([vectors, [near(target, 3, 0.05)]]))
    store.add([episode("my new address", id=old.id, days_ago=3)], np.stack([unit(4)]))  # supersedes the old version
    nearest = [episode(f"bob {i}", peer="bob") for i in range(10)]
    nearest += [episode(f"scout {i}", agent="scout") for i in range(10)]
    nearest += [episode(f"elsewhere {i}", workspace="other") for i in range(10)]
    store.add(nearest, np.stack([near(target, 100 + i, 0.05) for i in range(30)]))
    asked = query("", target, k=5, tau_days=0)
    hits = store.search(asked)
    assert store.dense.paths == {"hnsw": 1}
    assert len(hits) == 5 and ids(hits) == ids(exact.search(asked))
    assert {(h.episode.workspace, h.episode.peer, h.episode.agent) for h in hits} == {("w", "ann", "default")}
    assert all(h.episode.superseded_at is None for h in hits)
    before = store.search(query("", target, k=1, tau_days=0, as_of=NOW - 2 * DAY, now=NOW - 2 * DAY))
    assert [(h.episode.id, h.episode.user) for h in before] == [(old.id, "my old address")]


def test_a_scope_the_index_scan_misses_is_searched_exactly(open_store):
    store, exact = open_store(ann="hnsw"), open_store(ann="exact")
    target = unit(1)
    mine, vectors = spread(300, 2)
    store.add(mine, vectors)
    store.add(
        [episode(f"bob {i}", peer="bob") for i in range(200)], np.stack([near(target, i, 0.05) for i in range(200)])
    )
    asked = query("", target, k=5, tau_days=0)
    hits = store.search(asked)
    assert store.dense.paths == {"fallback": 1}  # every candidate the index gave was bob's
    assert len(hits) == 5 and {h.episode.peer for h in hits} == {"ann"}
    assert ids(hits) == ids(exact.search(asked))


def test_a_scope_with_a_small_share_of_the_nearest_rows_is_searched_exactly(open_store, storage_url):
    store, auto = open_store(ann="hnsw"), open_store()
    mine, vectors = spread(60, 2)
    store.add(mine, vectors)
    others, far = spread(1200, 3, peer="bob")
    store.add(others, far)
    first = ids(store.search(query("", unit(1), k=5)))  # about 5 of the 100 nearest are ann's: 2,000 needed
    assert store.dense.paths == {"fallback": 1}
    assert ids(store.search(query("", unit(1), k=5))) == first
    assert store.dense.paths == {"fallback": 1, "exact": 1}  # the share seen sends the next search to exact
    auto.search(query("", unit(1), k=5, peer="bob"))  # 1,260 rows: below `ann_min_rows`
    assert auto.dense.paths == {"exact": 1}


def test_a_scope_a_first_scan_undercounts_gets_a_wider_one(open_store):
    store = open_store(ann="hnsw")
    mine, vectors = spread(150, 2)
    store.add(mine, vectors)
    others, far = spread(350, 3, peer="bob")
    store.add(others, far)
    hits = store.search(query("", unit(1), k=5))  # ~30 % of the rows are ann's: 100 candidates keep ~30 < 50
    assert store.dense.paths == {"widened": 1} and {h.episode.peer for h in hits} == {"ann"}


def test_several_threads_recall_at_once_through_the_pool(open_store):
    store = open_store(ann="hnsw")
    items, vectors = spread(400, 5)
    store.add(items, vectors)
    asked = [query("note", near(unit(5 * 10_000 + i), i, 0.1), k=5) for i in range(16)]
    expected = [ids(store.search(q)) for q in asked]
    start = threading.Barrier(8)  # eight recalls set off together, twice a round

    def recall(q: object) -> list[str]:
        start.wait()
        return ids(store.search(q))

    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            assert list(pool.map(recall, asked)) == expected
    assert store.database.pool.get_stats()["pool_size"] > 1


def fill_without_index(url: str, rows: int) -> None:
    """A table from before the index: `rows` embedded episodes."""
    PostgresStore(url, schema=SCHEMA, ann="exact").close()
    sql(
        url,
        "INSERT INTO thoth_episodes (id, workspace, peer, thread, user_text, occurred_at, recorded_at, embedding) "
        "SELECT 'ep_' || i, 'w', 'ann', 't', 'note ' || i, i, i, "
        "(SELECT array_agg(random() - 0.5 + 0 * g + 0 * i) FROM generate_series(1, 384) AS g)::vector "
        f"FROM generate_series(1, {rows}) AS i",
    )


def test_a_big_existing_table_gets_its_index_in_the_background_once(storage_url, open_store):
    fill_without_index(storage_url, 600)
    stores = [open_store(build_in_background=False, ann_min_rows=1, inline_build_rows=500) for _ in range(3)]
    assert not any(store.dense._ready for store in stores)  # exact until the index is there
    start = threading.Barrier(3)

    def build(store: PostgresStore) -> bool:
        start.wait()
        return store.build_index()

    with ThreadPoolExecutor(3) as pool:
        built = list(pool.map(build, stores))
    assert built.count(True) >= 1
    with psycopg.connect(storage_url, options=f"-c search_path={SCHEMA},public") as db:
        assert hnsw_state(db) is True
    background = open_store(ann_min_rows=1, inline_build_rows=500)
    assert background._builder is None and background.dense._ready  # found built: nothing more to do
    background.search(query("", unit(1), k=5))
    assert background.dense.paths == {"hnsw": 1}


def test_an_interrupted_build_is_redone_by_the_next_worker(storage_url, open_store):
    fill_without_index(storage_url, 2000)
    with psycopg.connect(storage_url, autocommit=True, options=f"-c search_path={SCHEMA},public") as db:
        db.execute("SET statement_timeout = 100")
        with pytest.raises(psycopg.errors.QueryCanceled):
            db.execute(hnsw_ddl(concurrently=True))
        assert hnsw_state(db) is False  # left invalid, as a worker stopped mid-build leaves it
    store = open_store(ann_min_rows=1, inline_build_rows=500)
    assert store._builder is not None
    store._builder.join(timeout=120)
    assert store.dense._ready
    store.search(query("", unit(1), k=5))
    assert store.dense.paths == {"hnsw": 1}


def test_the_candidate_list_grows_with_the_table_unless_set():
    from thoth_episodic.postgres_ann import DenseSearch

    grown, fixed = DenseSearch(), DenseSearch(ef_search=200)
    assert [grown._ef_for(1.0, 50, rows) for rows in (20_000, 100_000, 500_000, 1_000_000, 5_000_000)] == [
        100,
        100,
        200,
        400,
        1000,
    ]
    assert fixed._ef_for(1.0, 50, 1_000_000) == 200 and fixed._ef_for(0.25, 50, 0) == 400
    assert fixed._ef_for(0.05, 50, 0) is None  # 2,000 candidates: past pgvector's ceiling, so exact
