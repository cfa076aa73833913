"""Episodic recall latency, ingest rate and memory at 10k-1M episodes, against sqlite-vec and FAISS; prints JSON.

    python bench/episodic_latency.py --n 10000,100000,1000000 [--queries 100] [--json]

Needs `pip install 'thoth-episodic[bench]'` (apsw + sqlite-vec, faiss-cpu, psutil).
Each size runs in its own subprocess (so peak RSS is per size). Synthetic episodes: 2,000
topics of 30 words (whole words of the WordPiece vocabulary); an episode's text is 14 words
of its topic plus 4 others, its
vector its topic centre plus noise (unit length), so both BM25 and cosine have structure.
Bulk loads use these vectors; the ingest rate with embeddings is measured in a store of its own through
the real write path (MiniLM on every episode). Queries are perturbed stored vectors (and 4
topic words). Reported per size: recall median/p95 through `EpisodicMemory.recall` (with the
MiniLM query embedding) and through the store (vector given), exact search and the 200-newest
pre-filter (`ann = "exact"`), the usearch HNSW index (`ann = "usearch"`: build time, file
size, latency, and recall@10 of its dense stage against exact search), the first recall of
a new process opening the store (`cold_start`, with its RSS: `auto` maps the saved index,
`exact` loads the vector cache; the file is in the page cache) and that process's recall
median with the query embedding, as an agent runs it (this bench's own process also holds the
exact vector cache and built the index). With the index, recall with the query embedding is also
timed with the paired synthetic vector searched (`paired_vectors`: MiniLM still embeds the text):
a MiniLM vector among synthetic ones is out of their distribution, which slows HNSW search (a
real store's query is among MiniLM vectors). Then top-10 KNN on the same
vectors by sqlite-vec (apsw), FAISS IndexFlatIP (every core and one thread), FAISS HNSW
(up to 200k) and numpy, with ratios peer / ours (> 1: ours is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
TOPICS = 2000


def percentiles(samples: list[float]) -> dict[str, float]:
    """Median and p95 in milliseconds."""
    ms = sorted(1000 * s for s in samples)
    return {"median_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 3)}


def timed(fn: Any, items: list[Any]) -> list[float]:
    """Seconds per call of fn on each item."""
    out = []
    for item in items:
        started = time.perf_counter()
        fn(item)
        out.append(time.perf_counter() - started)
    return out


@contextmanager
def paired_vectors(memory: Any, asked: list[tuple[str, np.ndarray]]) -> Iterator[None]:
    """`memory.embed` still runs MiniLM on each query's text (its cost is measured) but answers with the query's
    synthetic vector. The stored vectors are synthetic: a MiniLM vector lies outside their distribution, where
    the HNSW search walks about twice as far as for a query among vectors of its own kind (a real store's)."""
    vectors, embed = {text: vector for text, vector in asked}, memory.embed
    memory.embed = lambda texts: (embed(texts), np.stack([vectors[t] for t in texts]))[1]
    try:
        yield
    finally:
        del memory.embed


def _vocabulary() -> list[str]:
    """Whole English words of the MiniLM WordPiece vocabulary (one token each)."""
    from thoth_episodic.embedder import model_files

    return list(json.loads(model_files()[1].read_text())["model"]["vocab"])


class Synthetic:
    """Topic-structured texts and vectors, reproducible from a seed."""

    def __init__(self, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        vocabulary = [w for w in _vocabulary() if w.isalpha() and len(w) >= 4]
        picked = self.rng.choice(vocabulary, (TOPICS, 30))
        self.words = [list(row) for row in picked]
        centres = self.rng.standard_normal((TOPICS, DIM)).astype(np.float32)
        self.centres = centres / np.linalg.norm(centres, axis=1, keepdims=True)

    def batch(self, n: int) -> tuple[list[str], np.ndarray]:
        topics = self.rng.integers(0, TOPICS, n)
        texts = [
            " ".join(
                list(self.rng.choice(self.words[t], 14))
                + list(self.rng.choice(self.words[self.rng.integers(TOPICS)], 4))
            )
            for t in topics
        ]
        vectors = self.centres[topics] + 0.04 * self.rng.standard_normal((n, DIM)).astype(np.float32)
        return texts, (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)

    def queries(self, vectors: np.ndarray, texts: list[str], count: int) -> list[tuple[str, np.ndarray]]:
        picks = self.rng.integers(0, len(vectors), count)
        out = []
        for i in picks:
            v = vectors[i] + 0.04 * self.rng.standard_normal(DIM).astype(np.float32)
            out.append((" ".join(texts[i].split()[:4]), (v / np.linalg.norm(v)).astype(np.float32)))
        return out


def ingest_rate(memory: Any, synthetic: Synthetic, count: int) -> dict[str, float]:
    """Episodes per second through the real write path until every vector is stored (one turn at a time), and import."""
    from thoth_episodic.records import Episode

    texts, _ = synthetic.batch(2 * count)
    started = time.perf_counter()
    for text in texts[:count]:
        memory.write(Episode(workspace="ingest", peer="p", thread="t", user=text, assistant="Noted."))
    acknowledged = time.perf_counter() - started
    memory.flush()
    one_by_one = count / (time.perf_counter() - started)
    started = time.perf_counter()
    memory.write_many(
        [Episode(workspace="ingest", peer="p", thread="t", user=t, assistant="Noted.") for t in texts[count:]]
    )
    batched = count / (time.perf_counter() - started)
    return {
        "per_turn_eps": round(one_by_one, 1),
        "per_turn_write_ms": round(1000 * acknowledged / count, 2),
        "batched_eps": round(batched, 1),
        "episodes": count,
    }


def sqlite_vec_peer(vectors: np.ndarray, queries: list[np.ndarray], folder: Path) -> tuple[dict[str, float], float]:
    """Top-10 KNN latency of sqlite-vec (vec0 via apsw) and its load seconds."""
    import apsw
    import sqlite_vec

    db = apsw.Connection(str(folder / "vec.db"))
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}])")
    started = time.perf_counter()
    for start in range(0, len(vectors), 10000):
        with db:
            db.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                [(start + i + 1, vectors[start + i].tobytes()) for i in range(min(10000, len(vectors) - start))],
            )
    load = time.perf_counter() - started

    def knn(q: np.ndarray) -> list[Any]:
        return list(db.execute("SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 10", (q.tobytes(),)))

    return percentiles(timed(knn, queries)), load


def faiss_peer(vectors: np.ndarray, queries: list[np.ndarray], threads: int = 0) -> dict[str, float]:
    """Top-10 KNN latency of FAISS IndexFlatIP (on every core, or on `threads`)."""
    import faiss

    index = faiss.IndexFlatIP(DIM)
    index.add(vectors)
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(threads or before)
    try:
        return percentiles(timed(lambda q: index.search(q[None, :], 10), queries))
    finally:
        faiss.omp_set_num_threads(before)


def numpy_peer(vectors: np.ndarray, queries: list[np.ndarray]) -> dict[str, float]:
    """Top-10 KNN latency of a numpy matrix-vector product + argpartition."""

    def knn(q: np.ndarray) -> np.ndarray:
        scores = vectors @ q
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    return percentiles(timed(knn, queries))


def faiss_hnsw_peer(vectors: np.ndarray, queries: list[np.ndarray], exact: list[set[int]]) -> dict[str, Any]:
    """FAISS IndexHNSWFlat (M=16, efSearch 64): build seconds, latency and recall@10 (the library we did not pick)."""
    import faiss

    index = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction, index.hnsw.efSearch = 64, 64
    started = time.perf_counter()
    index.add(vectors)
    build = time.perf_counter() - started
    found = [set(index.search(q[None, :], 10)[1][0].tolist()) for q in queries]
    recall = np.mean([len(f & e) / 10 for f, e in zip(found, exact, strict=True)])
    return {
        "build_seconds": round(build, 1),
        "recall_at_10_vs_exact": round(float(recall), 4),
        **percentiles(timed(lambda q: index.search(q[None, :], 10), queries)),
    }


def ann_numbers(memory: Any, asked: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """The usearch HNSW index on the same file: build time, latency, recall@10 of its dense stage against exact."""
    from thoth_episodic.ann_files import scope_files
    from thoth_episodic.ann_index import CONNECTIVITY
    from thoth_episodic.records import Query
    from thoth_episodic.sqlite_store import SQLiteStore

    exact_store = memory.store
    indexed = SQLiteStore(exact_store.path, ann="usearch")
    started = time.perf_counter()
    indexed.search(Query("warm", "bench", "p", k=10, vector=asked[0][1]))
    build = time.perf_counter() - started

    def dense_top(store: Any, vector: np.ndarray) -> set[int]:
        query = Query("", "bench", "p", k=10, vector=vector)
        if store is indexed:
            return {key for key, _, _ in store._indexed_dense(query, None)[:10]}
        cache = store.refresh()
        return {key for key, _, _ in store._dense(cache, query, store._visible(cache, query, None))[:10]}

    overlap = [len(dense_top(indexed, v) & dense_top(exact_store, v)) / 10 for _, v in asked]
    dense_only = timed(lambda q: dense_top(indexed, q[1]), asked)
    search = timed(lambda q: indexed.search(Query(q[0], "bench", "p", k=10, vector=q[1])), asked)
    memory._store = indexed
    with_embedding = timed(lambda q: memory.recall(q[0], workspace="bench", peer="p", k=10), asked)
    with paired_vectors(memory, asked):
        in_distribution = timed(lambda q: memory.recall(q[0], workspace="bench", peer="p", k=10), asked)
    memory._store = exact_store
    out = {
        "library": f"usearch (HNSW, f16, connectivity {CONNECTIVITY})",
        "build_seconds": round(build, 1),
        "file_mb": round(sum(p.stat().st_size for p in scope_files(exact_store.path)) / 2**20, 1),  # one per scope
        "recall_at_10_vs_exact": round(float(np.mean(overlap)), 4),
        "dense_stage": percentiles(dense_only),
        "recall_vector_given": percentiles(search),
        "recall_with_query_embedding": percentiles(with_embedding),
        "recall_with_query_embedding_paired_vector": percentiles(in_distribution),
    }
    indexed.close()
    return out


def cold_start(home: Path, ann: str, asked: list[tuple[str, np.ndarray]]) -> dict[str, Any]:
    """A new process opens the store (`ann` mode) and recalls once: seconds to the first answer and its RSS;
    then the median of `EpisodicMemory.recall` (with the query embedding) over the asked texts, as an agent
    process runs it, alternating with recalls that search the paired synthetic vectors (`paired_vectors`)."""
    queries = home / "cold-start-queries.npz"
    np.savez(queries, texts=np.array([t for t, _ in asked]), vectors=np.stack([v for _, v in asked]))
    code = (
        "import json, statistics, sys, time, numpy as np, psutil\n"
        "from pathlib import Path\n"
        "started = time.perf_counter()\n"
        "from thoth_episodic import plugin\n"
        "from thoth_episodic.memory import memory_for\n"
        "from thoth_episodic.records import Query\n"
        "from thoth_core.testing import make_test_runtime\n"
        "runtime = make_test_runtime(Path(sys.argv[1]), {'episodic': plugin},"
        " config={'plugins': {'episodic': {'ann': sys.argv[2]}}})\n"
        "memory = memory_for(runtime)\n"
        "vector = np.random.default_rng(1).standard_normal(384).astype(np.float32)\n"
        "vector /= np.linalg.norm(vector)\n"
        "opened = time.perf_counter()\n"
        "memory.store.search(Query('first words', 'bench', 'p', k=10, vector=vector))\n"
        "first = time.perf_counter()\n"
        "memory.store.search(Query('second words', 'bench', 'p', k=10, vector=-vector))\n"
        "second = time.perf_counter()\n"
        "rss = psutil.Process().memory_info().rss\n"
        "memory.embed(['warm up'])\n"
        "sys.path.insert(0, sys.argv[4])\n"
        "from episodic_latency import paired_vectors\n"
        "saved = np.load(sys.argv[3])\n"
        "asked = list(zip(saved['texts'].tolist(), saved['vectors']))\n"
        "def recall_ms(text):\n"
        "    at = time.perf_counter()\n"
        "    memory.recall(text, workspace='bench', peer='p', k=10)\n"
        "    return 1000 * (time.perf_counter() - at)\n"
        "times, paired = [], []\n"
        "for text, _ in asked:\n"
        "    times.append(recall_ms(text))\n"
        "    with paired_vectors(memory, asked):\n"
        "        paired.append(recall_ms(text))\n"
        "json.dump({'import_and_open_s': round(opened - started, 2),"
        " 'first_recall_ms': round(1000 * (first - opened), 1),"
        " 'second_recall_ms': round(1000 * (second - first), 1),"
        " 'rss_mb': round(rss / 2**20),"
        " 'then_recall_with_query_embedding_median_ms': round(statistics.median(times), 2),"
        " 'then_recall_with_query_embedding_paired_vector_median_ms': round(statistics.median(paired), 2)},"
        " sys.stdout)\n"
    )
    args = [sys.executable, "-c", code, str(home), ann, str(queries), str(Path(__file__).parent)]
    return json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def one_size(n: int, queries: int, ingest_count: int, peers: bool, ann: bool = True) -> dict[str, Any]:
    """Everything for one store size (run in its own process)."""
    import psutil
    from thoth_episodic import plugin
    from thoth_episodic.memory import memory_for
    from thoth_episodic.records import Episode, Query

    from thoth_core.testing import make_test_runtime

    synthetic = Synthetic()
    result: dict[str, Any] = {"n": n}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
        runtime = make_test_runtime(
            Path(folder), {"episodic": plugin}, config={"plugins": {"episodic": {"ann": "exact"}}}
        )
        memory = memory_for(runtime)
        memory.embed(["warm up"])
        if ingest_count:  # in a store of its own: their MiniLM vectors would be every embedded query's nearest rows
            (Path(folder) / "ingest").mkdir()
            ingesting = memory_for(make_test_runtime(Path(folder) / "ingest", {"episodic": plugin}))
            result["ingest_with_embedding"] = ingest_rate(ingesting, synthetic, ingest_count)
            ingesting.close()
        all_vectors, sample_texts = [], []
        started, now = time.perf_counter(), time.time()
        for start in range(0, n, 20000):
            texts, vectors = synthetic.batch(min(20000, n - start))
            episodes = [
                Episode(
                    workspace="bench",
                    peer="p",
                    thread=f"t{(start + i) // 50}",
                    user=t,
                    occurred_at=now - (n - start - i),
                )
                for i, t in enumerate(texts)
            ]
            memory.store.add(episodes, vectors)
            all_vectors.append(vectors)
            sample_texts += texts[:200]
        result["bulk_load_seconds"] = round(time.perf_counter() - started, 1)
        vectors = np.concatenate(all_vectors)
        asked = synthetic.queries(vectors[: len(sample_texts)], sample_texts, queries)
        started = time.perf_counter()
        memory.store.search(Query("warm", "bench", "p", k=10, vector=asked[0][1]))
        result["cache_warm_seconds"] = round(time.perf_counter() - started, 2)

        def store_query(item: tuple[str, np.ndarray], newest: int | None = None) -> Any:
            return memory.store.search(Query(item[0], "bench", "p", k=10, vector=item[1], newest=newest))

        result["recall_with_query_embedding"] = percentiles(
            timed(lambda q: memory.recall(q[0], workspace="bench", peer="p", k=10), asked)
        )
        result["recall_vector_given"] = percentiles(timed(store_query, asked))
        result["recall_newest_200_prefilter"] = percentiles(timed(lambda q: store_query(q, 200), asked))
        if ann:
            result["ann"] = ann_numbers(memory, asked)
            result["cold_start"] = {mode: cold_start(Path(folder), mode, asked) for mode in ("auto", "exact")}
        if peers:
            qv = [q[1] for q in asked]
            exact = [set(np.argsort(-(vectors @ q))[:10].tolist()) for q in qv]
            result["numpy_flat"] = numpy_peer(vectors, qv)
            result["faiss_flat"] = faiss_peer(vectors, qv)
            result["faiss_flat_one_thread"] = faiss_peer(vectors, qv, threads=1)
            if n <= 200_000:  # its build takes as long as ours: measured where the library was chosen
                result["faiss_hnsw"] = faiss_hnsw_peer(vectors, qv, exact)
            result["sqlite_vec"], result["sqlite_vec_load_seconds"] = sqlite_vec_peer(vectors, qv, Path(folder))
            for name, ours in (
                ("exact", result["recall_vector_given"]),
                ("ann", result.get("ann", {}).get("dense_stage")),
            ):
                if ours:
                    result[f"ratio_peer_over_{name}"] = {
                        p: round(result[p]["median_ms"] / ours["median_ms"], 2)
                        for p in ("numpy_flat", "faiss_flat", "faiss_flat_one_thread", "faiss_hnsw", "sqlite_vec")
                        if p in result
                    }
        result["peak_rss_mb"] = round(max(psutil.Process().memory_info().rss, _peak_rss()) / 2**20)
        memory.close()
    return result


def _peak_rss() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="10000,100000", help="comma-separated store sizes")
    parser.add_argument("--queries", type=int, default=100, help="queries per measurement")
    parser.add_argument("--ingest", type=int, default=300, help="episodes for the ingest-with-embedding rate (0: skip)")
    parser.add_argument("--no-peers", action="store_true", help="skip sqlite-vec / FAISS / numpy")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        json.dump(one_size(args.one, args.queries, args.ingest, not args.no_peers), sys.stdout)
        return
    sizes = []
    for i, n in enumerate(int(x) for x in args.n.split(",")):
        command = [
            sys.executable,
            __file__,
            "--one",
            str(n),
            "--queries",
            str(args.queries),
            "--ingest",
            str(args.ingest if i == 0 else 0),
        ]
        command += ["--no-peers"] if args.no_peers else []
        sizes.append(json.loads(subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True).stdout))
    out = {"benchmark": "episodic_latency", "cpus": os.cpu_count(), "load_average": os.getloadavg(), "sizes": sizes}
    json.dump(out, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
