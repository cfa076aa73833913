"""Dense search through the scope's ANN index, every candidate checked in SQLite (no in-memory vector cache).

Each scope (workspace, peer, agent) has its own index file, so every candidate is in scope; SQLite keeps
those still current and with a vector, and their float32 blobs give exact scores. The scope's index is
asked for `OVERFETCH` times the wanted candidates, nearest first, and the nearest n are checked first:
usually they all pass, and the rest are never read (at 1M rows, reading 150 took 2.7 ms). A scope (peer)
of fewer than `SMALL_SCOPE` rows skips the index (and in `ann = "auto"` has no file): reading and scoring
its rows is cheaper; so does a scope whose file is not written yet. When too few survive (rows superseded
since the file was saved), the index is asked for `WIDE` times more, then the scope is scored exactly.
"""

from __future__ import annotations

import sqlite3

import numpy as np

from .ann_index import CURRENT, AnnIndex
from .records import Query

OVERFETCH = 3
SMALL_SCOPE = 2_000  # a peer with fewer rows (every version) is scored exactly: cheaper than the index
WIDE = 30
SCOPE_WHERE = f"workspace = ? AND peer = ? AND agent = ? AND {CURRENT}"
Row = tuple[int, float, float]  # rowid, cosine, occurred_at


def _scored(rows: list[tuple[int, float, bytes]], vector: np.ndarray, dim: int, n: int) -> list[Row]:
    """The n best of (rowid, occurred_at, embedding) rows by exact float32 cosine."""
    rows = [r for r in rows if len(r[2]) == 4 * dim]
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), dim)
    scores = matrix @ vector
    best = np.argsort(-scores, kind="stable")[:n]
    return [(int(rows[i][0]), float(scores[i]), float(rows[i][1])) for i in best]


def _verified(
    db: sqlite3.Connection, query: Query, rowids: np.ndarray, vector: np.ndarray, dim: int, n: int
) -> list[Row]:
    if not len(rowids):
        return []
    keys = [int(r) for r in rowids]
    rows = db.execute(
        # NOT INDEXED: with many rowids the planner would otherwise walk the whole scope's index
        f"SELECT rowid, occurred_at, embedding FROM episodes NOT INDEXED WHERE rowid IN ({', '.join('?' * len(keys))}) "
        f"AND {SCOPE_WHERE}",
        [*keys, query.workspace, query.peer, query.agent],
    ).fetchall()
    return _scored(rows, vector, dim, n)


def scope_exact(db: sqlite3.Connection, query: Query, vector: np.ndarray, dim: int, n: int) -> list[Row]:
    """Exact dense top-n over the scope's current rows, read from SQLite."""
    rows = db.execute(
        f"SELECT rowid, occurred_at, embedding FROM episodes WHERE {SCOPE_WHERE}",
        [query.workspace, query.peer, query.agent],
    ).fetchall()
    return _scored(rows, vector, dim, n)


def allowed_exact(
    db: sqlite3.Connection, query: Query, allowed: np.ndarray, vector: np.ndarray, dim: int, n: int
) -> list[Row]:
    """Exact dense top-n over a pre-filtered set of rowids (the newest-N pre-filter)."""
    return _verified(db, query, allowed, vector, dim, n)


def ann_dense(db: sqlite3.Connection, index: AnnIndex, query: Query, vector: np.ndarray, n: int) -> list[Row]:
    """Dense top-n for a current (not as-of) query (the caller holds the connection's lock)."""
    index.catch_up(db)
    small = db.execute(
        "SELECT count(*) FROM (SELECT 1 FROM episodes WHERE workspace = ? AND peer = ? LIMIT ?)",
        (query.workspace, query.peer, SMALL_SCOPE),
    ).fetchone()[0]
    if small < SMALL_SCOPE:
        return scope_exact(db, query, vector, index.dim, n)
    scope = (query.workspace, query.peer, query.agent)
    total = index.size(scope)
    for factor in (OVERFETCH, WIDE):
        count = max(n * factor, 100)
        keys = index.candidates(vector, count, scope)
        if keys is None:  # no file for this scope (yet)
            break
        found = _verified(db, query, keys[:n], vector, index.dim, n)  # in a store of one scope all n pass
        if len(found) < n:
            found = sorted(found + _verified(db, query, keys[n:], vector, index.dim, n), key=lambda row: -row[1])[:n]
        if len(found) >= n or count >= total:
            return found
    return scope_exact(db, query, vector, index.dim, n)
