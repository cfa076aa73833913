"""Forget's latency with the usearch index on, at 100k-1M episodes; prints JSON.

    python bench/episodic_forget.py --n 100000,1000000 [--peers 20] [--forgets 5] [--json]

A SQLite store of `n` `Synthetic` episodes of bench/episodic_latency.py (topic-structured unit
vectors), spread round-robin over `--peers` peers, gets its HNSW index built (`ann = "usearch"`,
in the writer child, as `thoth episodes import` builds it); then `--forgets` peers are forgotten one
after another through `SQLiteStore.delete`, as `thoth forget --peer` does. Reported per size: the
build, the file's size, forget's median and max seconds and, of that, the index rewrite's (the writer
child: load the file, remove the rows, fill their slots, save, check, rename) and the SQLite part
(delete, FTS5 optimize, VACUUM, WAL truncation); the forgotten vectors (float16) still found in the
index file afterwards (must be 0); the fillers holding their slots; and recall@10 of the index's dense
stage against exact search for a peer that stayed, before and after the forgets.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from episodic_latency import Synthetic  # noqa: E402

BATCH = 20_000


def load(store: Any, synthetic: Synthetic, n: int, peers: int) -> None:
    """n synthetic episodes, peer i % peers, in transactions of BATCH."""
    from thoth_episodic.records import Episode

    now = time.time()
    for start in range(0, n, BATCH):
        texts, vectors = synthetic.batch(min(BATCH, n - start))
        store.add(
            [
                Episode(
                    workspace="bench",
                    peer=f"p{(start + i) % peers}",
                    thread=f"t{(start + i) // 50}",
                    user=text,
                    occurred_at=now - (n - start - i),
                )
                for i, text in enumerate(texts)
            ],
            vectors,
        )
        print(f"loaded {start + len(texts)}", file=sys.stderr, flush=True)


def dense_recall(indexed: Any, exact: Any, peer: str, probes: np.ndarray) -> float:
    """Mean overlap of the index's dense top 10 with exact search's, for one peer."""
    from thoth_episodic.records import Query

    overlaps = []
    for vector in probes:
        query = Query("", "bench", peer, k=10, vector=vector)
        found = {key for key, _, _ in indexed._indexed_dense(query, None)[:10]}
        cache = exact.refresh()
        truth = {key for key, _, _ in exact._dense(cache, query, exact._visible(cache, query, None))[:10]}
        overlaps.append(len(found & truth) / 10)
    return round(float(np.mean(overlaps)), 4)


def left_in(path: Path, vectors: list[np.ndarray]) -> int:
    """How many of the vectors have a 48-byte float16 slice in the file."""
    data = path.read_bytes()
    return sum(data.find(v.astype(np.float16).tobytes()[:48]) >= 0 for v in vectors)


def one_size(n: int, peers: int, forgets: int, folder: Path) -> dict[str, Any]:
    """Build, then forget `forgets` peers one by one; the numbers for this size."""
    from thoth_episodic.sqlite_store import SQLiteStore

    synthetic = Synthetic()
    path = folder / f"episodes-{n}.db"
    exact = SQLiteStore(path, ann="exact")
    load(exact, synthetic, n, peers)
    indexed = SQLiteStore(path, ann="usearch")
    started = time.perf_counter()
    built = [0]

    def progress(rows: int) -> None:
        built[0] += rows
        if built[0] % 100_000 < rows:
            print(f"indexed {built[0]}", file=sys.stderr, flush=True)

    indexed.index_now(progress=progress)
    result: dict[str, Any] = {"n": n, "peers": peers, "build_seconds": round(time.perf_counter() - started, 1)}
    result["file_mb"] = round(indexed._index.path.stat().st_size / 2**20, 1)
    kept = f"p{peers - 1}"
    probes = synthetic.queries(synthetic.batch(200)[1], [""] * 200, 30)
    vectors = np.stack([v for _, v in probes])
    result["recall_at_10_before"] = dense_recall(indexed, exact, kept, vectors)

    rewrites: list[float] = []
    erase = indexed._erase_from_index

    def timed_erase(rowids: list[int]) -> None:
        began = time.perf_counter()
        erase(rowids)
        rewrites.append(time.perf_counter() - began)

    indexed._erase_from_index = timed_erase  # type: ignore[method-assign]
    totals, forgotten = [], []
    for i in range(forgets):
        rows = indexed._db.execute("SELECT embedding FROM episodes WHERE peer = ?", (f"p{i}",)).fetchall()
        forgotten += [np.frombuffer(r[0], dtype=np.float32) for r in rows[:: max(1, len(rows) // 200)]]
        began = time.perf_counter()
        indexed.delete(workspace="bench", peer=f"p{i}")
        totals.append(time.perf_counter() - began)
        print(f"forgot p{i}: {totals[-1]:.2f} s (index rewrite {rewrites[-1]:.2f} s)", file=sys.stderr, flush=True)
    result["forget_seconds"] = {"median": round(float(np.median(totals)), 3), "max": round(max(totals), 3)}
    result["index_rewrite_seconds"] = {"median": round(float(np.median(rewrites)), 3), "max": round(max(rewrites), 3)}
    result["sqlite_seconds_median"] = round(float(np.median(np.subtract(totals, rewrites))), 3)
    result["rows_per_forget"] = n // peers
    result["forgotten_vectors_checked"] = len(forgotten)
    result["forgotten_vectors_left_in_index"] = left_in(indexed._index.path, forgotten)
    result["fillers"] = json.loads(indexed._index.meta_path.read_text())["fillers"]
    result["recall_at_10_after"] = dense_recall(indexed, exact, kept, vectors)
    indexed.close()
    exact.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="100000", help="comma-separated store sizes")
    parser.add_argument("--peers", type=int, default=20, help="peers the episodes are spread over")
    parser.add_argument("--forgets", type=int, default=5, help="peers forgotten, one after another")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    args = parser.parse_args()
    results = []
    for n in (int(x) for x in args.n.split(",")):
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
            results.append(one_size(n, args.peers, args.forgets, Path(folder)))
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
