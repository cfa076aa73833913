"""Episodic recall on PostgreSQL (pgvector HNSW) against the SQLite backend, same episodes, same run; prints JSON.

    python bench/postgres_recall.py [--sizes 100000,1000000] [--queries 100] [--json]

Needs pgserver (a PostgreSQL 16 with pgvector, started in a temp dir) and the `bench` extra.
The episodes are `Synthetic` ones of bench/episodic_latency.py (topic-structured texts and
unit vectors; queries are perturbed stored vectors plus 4 topic words), one workspace and
peer. PostgreSQL (shared_buffers 2GB, `--shared-buffers`): bulk load with binary COPY into the
`[storage] url` schema, VACUUM ANALYZE, then
the HNSW index built the way a worker builds it on an existing table (`build_index`,
CREATE INDEX CONCURRENTLY); recall through a runtime configured with only `[storage] url`.
SQLite: the load and usearch numbers of bench/episodic_latency.py (`ann_numbers`). Reported
per size and backend: load and index build seconds, median/p95 recall latency with the
vector given (`store.search`) and with the MiniLM query embedding (`EpisodicMemory.recall`),
the dense stage alone (index and exact), and dense recall@10 of the index against exact
search on the same backend (`dense_stage_index` and the recall@10 always ask the index, whatever the
size; recall through the runtime uses `ann = "auto"`). `dense_paths` say how the PostgreSQL searches ran.
The full-text stage alone is timed as the store runs it (`lexical_stage`: from `PAIRED_ROWS` rows, the
rows holding two of the words first) and ranking every matching row (`lexical_stage_all_matches`), with
the share of the first's top 50 that score as high as the second's (`lexical_recall_at_50_vs_all_matches`).
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_latency import Synthetic, ann_numbers, percentiles, timed  # noqa: E402

BATCH = 20_000
COPIED = "id, workspace, peer, thread, user_text, body, dates, occurred_at, recorded_at, embedding"


def episodes_of(synthetic: Synthetic, n: int) -> tuple[list[Any], np.ndarray]:
    """n synthetic episodes (one workspace and peer, 50 per thread, a second apart) and their vectors."""
    from thoth_episodic.records import Episode

    now, out, vectors = time.time(), [], []
    for start in range(0, n, BATCH):
        texts, batch = synthetic.batch(min(BATCH, n - start))
        out += [
            Episode(
                workspace="bench",
                peer="p",
                thread=f"t{(start + i) // 50}",
                user=text,
                id=f"ep_{start + i:09d}",
                occurred_at=now - (n - start - i),
                recorded_at=now - (n - start - i),
            )
            for i, text in enumerate(texts)
        ]
        vectors.append(batch)
    return out, np.concatenate(vectors)


def copy_into_postgres(url: str, episodes: Iterable[Any], vectors: np.ndarray | None = None) -> None:
    """Binary COPY of the episodes (with their vectors, if given) into the `thoth_episodic` schema (made by the
    store), then VACUUM ANALYZE."""
    import psycopg
    from psycopg.adapt import Dumper
    from psycopg.pq import Format
    from psycopg.types import TypeInfo
    from thoth_episodic.postgres_store import SCHEMA
    from thoth_episodic.scoring import date_words, index_text

    with psycopg.connect(url, autocommit=True, options=f"-c search_path={SCHEMA},public") as conn:
        info = TypeInfo.fetch(conn, "vector")
        assert info is not None, "pgvector is not installed in this database"

        class VectorDumper(Dumper):
            """pgvector's binary format: dimensions, a reserved word, big-endian float4s."""

            format = Format.BINARY
            oid = info.oid

            def dump(self, obj: Any) -> bytes:
                return struct.pack(">HH", len(obj), 0) + np.asarray(obj, dtype=">f4").tobytes()

        conn.adapters.register_dumper(None, VectorDumper)
        conn.execute("ALTER INDEX thoth_episodes_tsv SET (fastupdate = on)")  # a bulk load queues its words
        columns, types = COPIED, ["text"] * 7 + ["float8", "float8", info.oid]
        if vectors is None:
            columns, types = COPIED.removesuffix(", embedding"), types[:-1]
        copying = f"COPY thoth_episodes ({columns}) FROM STDIN (FORMAT BINARY)"
        with conn.cursor() as cursor, cursor.copy(copying) as copy:
            copy.set_types(types)
            for i, episode in enumerate(episodes):
                row = (
                    episode.id,
                    episode.workspace,
                    episode.peer,
                    episode.thread,
                    episode.user,
                    index_text(episode),
                    date_words(episode.occurred_at),
                    episode.occurred_at,
                    episode.recorded_at,
                )
                copy.write_row(row if vectors is None else (*row, vectors[i]))
        conn.execute("VACUUM ANALYZE thoth_episodes")  # merges the queued words into the index
        conn.execute("ALTER INDEX thoth_episodes_tsv SET (fastupdate = off)")


def postgres_numbers(url: str, home: Path, episodes: list[Any], vectors: np.ndarray, asked: list[Any]) -> dict:
    """Load, build the index, and time recall on PostgreSQL."""
    from thoth_episodic import plugin, postgres_fts
    from thoth_episodic.memory import memory_for
    from thoth_episodic.postgres_ann import DenseSearch
    from thoth_episodic.postgres_store import SCHEMA, PostgresStore
    from thoth_episodic.records import Query
    from thoth_episodic.scoring import query_terms

    from thoth_core.testing import make_test_runtime

    out: dict[str, Any] = {}
    started = time.perf_counter()
    PostgresStore(url, schema=SCHEMA, ann="exact").close()  # the tables, without the index: COPY, then build
    copy_into_postgres(url, episodes, vectors)
    out["load_seconds"] = round(time.perf_counter() - started, 1)
    loader = PostgresStore(url, schema=SCHEMA, ann="exact")
    started = time.perf_counter()
    assert loader.build_index(memory=f"{max(256, len(episodes) * 5 // 2000)}MB")  # the graph fits: ~2.5 kB a row
    out["index_build_seconds"] = round(time.perf_counter() - started, 1)
    loader.close()
    runtime = make_test_runtime(home, {"episodic": plugin}, config={"storage": {"url": url}})
    memory = memory_for(runtime)
    memory.embed(["warm up"])
    store = memory.store
    assert isinstance(store, PostgresStore)
    started = time.perf_counter()
    store.search(Query("warm", "bench", "p", k=10, vector=asked[0][1]))  # counts the scope once
    out["first_recall_ms"] = round(1000 * (time.perf_counter() - started), 1)
    out["recall_vector_given"] = percentiles(
        timed(lambda q: store.search(Query(q[0], "bench", "p", k=10, vector=q[1])), asked)
    )
    out["recall_with_query_embedding"] = percentiles(
        timed(lambda q: memory.recall(q[0], workspace="bench", peer="p", k=10), asked)
    )
    exact, indexed = DenseSearch(ann="exact"), DenseSearch(ann="hnsw", ef_search=store.dense.ef_search)
    indexed.index_built()

    params = {"workspace": "bench", "peer": "p", "agent": "default", "as_of": None, "newest": None, "n": 50}
    scope = "workspace = %(workspace)s AND peer = %(peer)s AND agent = %(agent)s AND superseded_at IS NULL"

    def dense(search: DenseSearch, vector: np.ndarray) -> list[int]:
        given = params | {"v": "[" + ",".join(f"{v:.7g}" for v in vector) + "]"}
        with store._connection() as conn:
            return [row[0] for row in search.search(conn, scope=scope, params=given, n=50)][:10]

    truth: list[list[int]] = []  # exact search takes seconds at 1M rows: timed once, while finding the truth
    out["dense_stage_exact"] = percentiles(timed(lambda q: truth.append(dense(exact, q[1])), asked))
    overlap = [len(set(dense(indexed, q[1])) & set(top)) / 10 for q, top in zip(asked, truth, strict=True)]
    out["dense_recall_at_10_vs_exact"] = round(float(np.mean(overlap)), 4)
    out["dense_stage_index"] = percentiles(timed(lambda q: dense(indexed, q[1]), asked))
    lexical: list[list[tuple[int, float, float]]] = []
    out["lexical_stage"] = percentiles(timed(lambda q: lexical.append(store._lexical(q[0], scope, params)), asked))
    everything: list[list[tuple[int, float, float]]] = []
    with patched(postgres_fts, "PAIRED_ROWS", 10**15):  # every matching row ranked, however large the table
        out["lexical_stage_all_matches"] = percentiles(
            timed(lambda q: everything.append(store._lexical(q[0], scope, params)), asked)
        )
    # as good as ranking every match: a candidate counts when it scores at least the full ranking's last (ties)
    kept = [
        sum(s >= full[-1][1] - 1e-6 for _, s, _ in got) / len(full) for got, full in zip(lexical, everything) if full
    ]
    out["lexical_recall_at_50_vs_all_matches"] = round(float(np.mean(kept)), 4)
    matches = "SELECT count(*) FROM thoth_episodes, websearch_to_tsquery('english', %(q)s) AS q WHERE {} AND tsv @@ q"
    counts = [store._rows(matches.format(scope), params | {"q": " or ".join(query_terms(q[0]))})[0][0] for q in asked]
    out["lexical_matches_median"] = int(np.median(counts))  # the rows a full-text query ranks
    with store._connection() as conn:
        out["ef_search"] = store.dense.first_ef_search(
            conn, {"workspace": "bench", "peer": "p", "agent": "default"}, 50
        )
    out["dense_paths"] = dict(store.dense.paths)  # the runtime's store: ann = "auto"
    out["dense_paths_index"] = dict(indexed.paths)
    memory.close()
    return out


@contextmanager
def patched(module: Any, name: str, value: Any) -> Iterator[None]:
    """`module.name` set to `value` for the block."""
    kept = getattr(module, name)
    setattr(module, name, value)
    try:
        yield
    finally:
        setattr(module, name, kept)


def sqlite_numbers(home: Path, episodes: list[Any], vectors: np.ndarray, asked: list[Any]) -> dict:
    """Load (the store's own batched add) and time recall on SQLite, exact and through usearch."""
    from thoth_episodic import plugin
    from thoth_episodic.memory import memory_for
    from thoth_episodic.records import Query

    from thoth_core.testing import make_test_runtime

    runtime = make_test_runtime(home, {"episodic": plugin}, config={"plugins": {"episodic": {"ann": "exact"}}})
    memory = memory_for(runtime)
    memory.embed(["warm up"])
    started = time.perf_counter()
    for start in range(0, len(episodes), BATCH):
        memory.store.add(episodes[start : start + BATCH], vectors[start : start + BATCH])
    out: dict[str, Any] = {"load_seconds": round(time.perf_counter() - started, 1)}
    memory.store.search(Query("warm", "bench", "p", k=10, vector=asked[0][1]))
    out["exact"] = {
        "recall_vector_given": percentiles(
            timed(lambda q: memory.store.search(Query(q[0], "bench", "p", k=10, vector=q[1])), asked)
        ),
        "recall_with_query_embedding": percentiles(
            timed(lambda q: memory.recall(q[0], workspace="bench", peer="p", k=10), asked)
        ),
    }
    out["usearch"] = ann_numbers(memory, asked)
    memory.close()
    return out


def one_size(server: Any, n: int, queries: int, backends: list[str]) -> dict[str, Any]:
    """Both backends on the same n episodes."""
    from thoth_core.testing.postgres import fresh_database

    synthetic = Synthetic()
    episodes, vectors = episodes_of(synthetic, n)
    sample = min(len(episodes), 4000)
    asked = synthetic.queries(vectors[:sample], [e.user for e in episodes[:sample]], queries)
    result: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
        if "postgres" in backends:
            (Path(folder) / "pg").mkdir()
            result["postgres"] = postgres_numbers(fresh_database(server), Path(folder) / "pg", episodes, vectors, asked)
        if "sqlite" in backends:
            (Path(folder) / "sqlite").mkdir()
            result["sqlite"] = sqlite_numbers(Path(folder) / "sqlite", episodes, vectors, asked)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000", help="comma-separated store sizes")
    parser.add_argument("--queries", type=int, default=100, help="queries per measurement")
    parser.add_argument("--backends", default="postgres,sqlite", help="which backends (comma-separated)")
    parser.add_argument("--shared-buffers", default="2GB", help="PostgreSQL's shared_buffers for the run")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    args = parser.parse_args()
    server = start_server(args.shared_buffers)
    try:
        with server_connection(server) as conn:
            version = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
            out = {
                "benchmark": "postgres_recall",
                "cpus": os.cpu_count(),
                "pgvector": version.fetchone()[0],
                "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
            }
        out["sizes"] = [one_size(server, int(n), args.queries, args.backends.split(",")) for n in args.sizes.split(",")]
        out["load_average"] = os.getloadavg()
    finally:
        server.cleanup()
    json.dump(out, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


def start_server(shared_buffers: str) -> Any:
    """pgserver's PostgreSQL in a temp dir, restarted with `shared_buffers` (its default, 128MB, is a laptop's)."""
    import pgserver
    from psycopg import sql

    parent = Path(tempfile.mkdtemp(prefix="thoth-pg-bench-", dir=os.environ.get("BENCH_TMP")))
    parent.chmod(0o755)  # run as root, pgserver starts postgres as its own user
    server = pgserver.get_server(parent / "data", cleanup_mode="stop")
    with server_connection(server) as conn:
        conn.execute(sql.SQL("ALTER SYSTEM SET shared_buffers = {}").format(sql.Literal(shared_buffers)))
    server.cleanup()
    return pgserver.get_server(parent / "data", cleanup_mode="delete")


def server_connection(server: Any) -> Any:
    """A connection to the server's default database."""
    import psycopg

    return psycopg.connect(server.get_uri(), autocommit=True)


if __name__ == "__main__":
    main()
