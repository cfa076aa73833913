"""Dense search in PostgreSQL: exact over the scope, or through the pgvector HNSW index when that pays.

pgvector 0.6 has no iterative index scans: an HNSW scan returns at most `hnsw.ef_search`
rows, of every workspace, peer and agent, and the scope (and as-of time) is applied after it.
So the index serves tables of at least `ann_min_rows` embedded rows (`ann = "auto"`;
`"hnsw"`: any table; `"exact"`: never). A scope's share of the nearest rows is learnt from
its searches: a scan asks for `OVERFETCH` times the candidates wanted over that share (at
least `ef_search`, which grows with the table unless `ann_expansion` sets it); when too few
survive the scope, it asks once more for as many as the share seen says it needs, and
searches exactly when that is over `MAX_EF_SEARCH`. A scope whose share is that small goes
straight to exact search until `ESTIMATE_SECONDS` have passed. Exact search orders by an
expression the index cannot serve, so the planner never turns it approximate. Nothing here
counts a large scope: counting reads every row.
"""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from typing import Any

from .postgres_schema import hnsw_state

ANN_MODES = ("auto", "exact", "hnsw", "usearch")  # "usearch": the sqlite backend's word for "always the index"
ANN_MIN_ROWS = 10_000  # `auto` uses the index from here: exact costs ~1 µs a row (bench/postgres_recall.py)
EF_SEARCH = 100  # the fewest candidates an index scan asks for, unless `ann_expansion` says otherwise
# and it grows with the table: at 1M rows (m 24) 400 kept recall@10 at 0.97-0.985 in 8-9 ms over two query
# sets (300: 0.94-0.965; 600: 0.98-0.985 in 16-18 ms; bench/postgres_recall.py)
EF_PER_100K_ROWS = 40
MAX_EF_SEARCH = 1000  # pgvector's ceiling for hnsw.ef_search
OVERFETCH = 2.0  # candidates asked per candidate wanted, over the scope's share of them
ESTIMATE_SECONDS = 300.0  # how long a table size or a scope's share is trusted (a delete forgets them)
READY_SECONDS = 60.0  # how often a missing or building index is looked for again

EXACT = (
    "SELECT rowid, 1 - (embedding <=> %(v)s::vector) AS similarity, occurred_at FROM thoth_episodes "
    "WHERE {scope} AND embedding IS NOT NULL ORDER BY similarity DESC LIMIT %(n)s"
)
NEAREST = (
    "SELECT rowid, 1 - distance, occurred_at FROM ("
    " SELECT rowid, workspace, peer, agent, occurred_at, recorded_at, superseded_at,"
    " embedding <=> %(v)s::vector AS distance FROM thoth_episodes WHERE embedding IS NOT NULL"
    " ORDER BY embedding <=> %(v)s::vector LIMIT %(ef)s"
    ") AS nearest WHERE {scope} ORDER BY distance"
)
TABLE_ROWS = "SELECT reltuples FROM pg_class WHERE oid = to_regclass('thoth_episodes')"
COUNTED_ROWS = "SELECT count(*) FROM (SELECT 1 FROM thoth_episodes WHERE embedding IS NOT NULL LIMIT %s) AS counted"

Scope = tuple[str, str, str]


class DenseSearch:
    """Chooses exact or HNSW search per query and runs it; `paths` counts how each search ran."""

    def __init__(self, *, ann: str = "auto", min_rows: int = ANN_MIN_ROWS, ef_search: int | None = None) -> None:
        self.ann = "hnsw" if ann == "usearch" else ann
        self.min_rows = min_rows
        self.ef_search = None if ef_search is None else min(ef_search, MAX_EF_SEARCH)  # None: grows with the table
        # "hnsw": the first index scan sufficed; "widened": a second, larger one; "fallback": exact after
        # index scans; "exact": exact at once
        self.paths: Counter[str] = Counter()
        self._shares: dict[Scope, tuple[float, float]] = {}
        self._table_rows: tuple[int, float] = (0, -math.inf)
        self._ready, self._ready_checked = False, -math.inf
        self._lock = threading.Lock()

    def index_built(self) -> None:
        """The HNSW index is usable from now on."""
        self._ready = True

    def forget_estimates(self) -> None:
        """Measure the table and the scopes again (after a delete)."""
        with self._lock:
            self._shares.clear()
            self._table_rows = (0, -math.inf)

    def search(self, conn: Any, *, scope: str, params: dict[str, Any], n: int) -> list[tuple[int, float, float]]:
        """The `n` nearest rows of the scope: (rowid, cosine similarity, occurred_at), best first."""
        key = (params["workspace"], params["peer"], params["agent"])
        ef = self.first_ef_search(conn, params, n)
        path = "exact"
        for attempt in ("hnsw", "widened"):
            if ef is None:
                break
            with conn.transaction():
                conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                rows = conn.execute(NEAREST.format(scope=scope), {**params, "ef": ef}).fetchall()
            share = len(rows) / ef
            with self._lock:
                self._shares[key] = (share, time.monotonic())
            if len(rows) >= n:
                self._count(attempt)
                return [(r[0], float(r[1]), r[2]) for r in rows[:n]]
            path, wider = "fallback", self._ef_for(share, n, 0)
            ef = wider if attempt == "hnsw" and wider is not None and wider > ef else None
        rows = conn.execute(EXACT.format(scope=scope), {**params, "n": n}).fetchall()
        self._count(path)
        return [(r[0], float(r[1]), r[2]) for r in rows]

    def first_ef_search(self, conn: Any, params: dict[str, Any], n: int) -> int | None:
        """How many candidates to ask the index for first, or None to search exactly."""
        if self.ann == "exact" or params.get("newest") or not self._index_ready(conn):
            return None
        rows = self.table_rows(conn) if self.ann == "auto" or self.ef_search is None else 0
        if self.ann == "auto" and rows < self.min_rows:
            return None
        with self._lock:
            share, at = self._shares.get((params["workspace"], params["peer"], params["agent"]), (1.0, -math.inf))
        return self._ef_for(share if time.monotonic() - at < ESTIMATE_SECONDS else 1.0, n, rows)

    def _ef_for(self, share: float, n: int, rows: int) -> int | None:
        """Candidates to ask for when `share` of them are in the scope; None when over the ceiling."""
        if share <= 0:
            return None
        least = self.ef_search or min(MAX_EF_SEARCH, max(EF_SEARCH, EF_PER_100K_ROWS * rows // 100_000))
        ef = max(least, n, math.ceil(OVERFETCH * n / share))
        return ef if ef <= MAX_EF_SEARCH else None

    def _count(self, path: str) -> None:
        with self._lock:
            self.paths[path] += 1

    def _index_ready(self, conn: Any) -> bool:
        if self._ready or time.monotonic() - self._ready_checked < READY_SECONDS:
            return self._ready
        self._ready, self._ready_checked = hnsw_state(conn) is True, time.monotonic()
        return self._ready

    def table_rows(self, conn: Any) -> int:
        """About how many rows the table has: the planner's figure, or a count up to `min_rows` before it has one."""
        with self._lock:
            rows, at = self._table_rows
        if time.monotonic() - at < ESTIMATE_SECONDS:
            return rows
        row = conn.execute(TABLE_ROWS).fetchone()
        rows = int(row[0]) if row is not None and row[0] > 0 else 0
        if rows < self.min_rows:  # never analysed yet (-1), or small: count, as far as it matters
            rows = int(conn.execute(COUNTED_ROWS, (self.min_rows,)).fetchone()[0])
        with self._lock:
            self._table_rows = (rows, time.monotonic())
        return rows
