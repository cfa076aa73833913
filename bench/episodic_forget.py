"""Forget's latency with the usearch index on, at 100k-1M episodes; prints JSON.

    python bench/episodic_forget.py --n 100000,1000000 [--peers 20] [--forgets 5] [--thread-forgets 3] [--json]

A SQLite store of `n` `Synthetic` episodes of bench/episodic_latency.py (topic-structured unit
vectors), spread round-robin over `--peers` peers, gets its HNSW indexes built (`ann = "usearch"`,
in the writer child, as `thoth episodes import` builds them); then `--forgets` peers are forgotten one
after another through `SQLiteStore.delete`, as `thoth forget --peer` does, and `--thread-forgets`
threads of another peer, as `thoth forget --peer P --thread T` does. Reported per size: the build,
the files' size, forget's median and max seconds and, of that, the index part (the writer child:
peer files deleted; a thread's rows removed from its peer's file, their slots filled, saved, checked,
renamed) and the SQLite part (delete, then `scrub`: FTS5 optimize, WAL truncation), with scrub's own
share; the forgotten vectors (float16) still found in any index file afterwards (must be 0); the
fillers holding removed slots; and recall@10 of the index's dense stage against exact search for a
peer that stayed, before and after the forgets.
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


def index_files(db: Path) -> list[Path]:
    """Every index file beside the store (either layout), sidecars and temporaries included."""
    return sorted(p for p in db.parent.glob(f"{db.name}.usearch*") if p.is_file())


def left_in(db: Path, vectors: list[np.ndarray]) -> int:
    """How many of the vectors have a 48-byte float16 slice in any index file."""
    found = set()
    for path in index_files(db):
        data = path.read_bytes()
        found |= {i for i, v in enumerate(vectors) if data.find(v.astype(np.float16).tobytes()[:48]) >= 0}
    return len(found)


def timed(seconds: list[float], function: Any) -> Any:
    """`function`, appending each call's seconds to `seconds`."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - began)

    return wrapper


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and max, rounded."""
    return {"median": round(float(np.median(seconds)), 3), "max": round(max(seconds), 3)} if seconds else {}


def one_size(n: int, peers: int, forgets: int, thread_forgets: int, folder: Path) -> dict[str, Any]:
    """Build, then forget `forgets` peers and `thread_forgets` threads one by one; the numbers for this size."""
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
    result["file_mb"] = round(sum(p.stat().st_size for p in index_files(path)) / 2**20, 1)
    result["files"] = len([p for p in index_files(path) if not p.name.endswith((".json", ".lock"))])
    kept = f"p{peers - 1}"
    probes = synthetic.queries(synthetic.batch(200)[1], [""] * 200, 30)
    vectors = np.stack([v for _, v in probes])
    result["recall_at_10_before"] = dense_recall(indexed, exact, kept, vectors)

    from thoth_episodic import sqlite_store

    rewrites: list[float] = []
    scrubs: list[float] = []
    indexed._erase_from_index = timed(rewrites, indexed._erase_from_index)  # type: ignore[method-assign]
    scrub = sqlite_store.scrub
    sqlite_store.scrub = timed(scrubs, scrub)  # type: ignore[assignment]
    forgotten: list[np.ndarray] = []
    sizes: list[int] = []

    def forget(label: str, **where: str) -> float:
        clause = " AND ".join(f"{column} = ?" for column in where)
        rows = indexed._db.execute(f"SELECT embedding FROM episodes WHERE {clause}", list(where.values())).fetchall()
        forgotten.extend(np.frombuffer(r[0], dtype=np.float32) for r in rows[:: max(1, len(rows) // 200)])
        sizes.append(len(rows))
        began = time.perf_counter()
        indexed.delete(workspace="bench", **where)
        took = time.perf_counter() - began
        print(f"forgot {label} ({len(rows)} rows): {took:.2f} s (index {rewrites[-1]:.2f} s)", file=sys.stderr)
        return took

    try:
        totals = [forget(f"p{i}", peer=f"p{i}") for i in range(forgets)]
        peer_rewrites, peer_scrubs = list(rewrites), list(scrubs)
        other = f"p{peers - 2}"
        threads = [
            r[0]
            for r in indexed._db.execute(
                "SELECT DISTINCT thread FROM episodes WHERE peer = ? ORDER BY thread LIMIT ?", (other, thread_forgets)
            )
        ]
        thread_totals = [forget(f"{other}/{t}", peer=other, thread=t) for t in threads]
    finally:
        sqlite_store.scrub = scrub  # type: ignore[assignment]
    result["forget_seconds"] = summary(totals)
    result["index_seconds"] = summary(peer_rewrites)
    result["sqlite_seconds"] = summary(list(np.subtract(totals, peer_rewrites)))
    result["scrub_seconds"] = summary(peer_scrubs)
    result["rows_per_forget"] = n // peers
    result["thread_forget_seconds"] = summary(thread_totals)
    result["thread_index_seconds"] = summary(rewrites[len(peer_rewrites) :])
    result["rows_per_thread_forget"] = sizes[len(peer_rewrites) :]
    result["forgotten_vectors_checked"] = len(forgotten)
    result["forgotten_vectors_left_in_index"] = left_in(path, forgotten)
    result["fillers"] = sum(
        json.loads(p.read_text()).get("fillers", 0) for p in path.parent.glob(f"{path.name}.usearch-*.json")
    )
    result["recall_at_10_after"] = dense_recall(indexed, exact, kept, vectors)
    indexed.close()
    exact.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", default="100000", help="comma-separated store sizes")
    parser.add_argument("--peers", type=int, default=20, help="peers the episodes are spread over")
    parser.add_argument("--forgets", type=int, default=5, help="peers forgotten, one after another")
    parser.add_argument("--thread-forgets", type=int, default=3, help="threads of another peer forgotten after")
    parser.add_argument("--json", action="store_true", help="compact JSON")
    args = parser.parse_args()
    results = []
    for n in (int(x) for x in args.n.split(",")):
        with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as folder:
            results.append(one_size(n, args.peers, args.forgets, args.thread_forgets, Path(folder)))
    print(json.dumps(results, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
