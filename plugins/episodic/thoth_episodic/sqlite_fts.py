"""The SQLite store's full-text stage: BM25 from FTS5 on read-only connections of its own."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from thoth_core.storage import connect

from .episode_table import AS_OF
from .records import Query
from .scoring import PAIRED_ROWS, candidate_count, fts_any, fts_pairs, large_store_matches, query_terms
from .sqlite_schema import newest_rowid

# In a large store a word held by many rows costs BM25 a score for each of them, and, paired, makes most pairs
# match. LoCoMo questions over 1M rows of conversation text (bench/lexical_scale.py): 58-88 ms median (p90 214-424)
# with every word; 49-79 ms (p90 209-332) without the words in over a fifth of the rows, for as many answers among
# the 10 and the 50 best. A tenth was faster (34-47 ms) but lost 2.5 and 3.1 points of R@10 on two conversations.
COMMON_SHARE = 0.2  # a large store leaves out of the full-text query the words held by more than this share of rows
SLICES, SLICE_ROWS = 2, 5_000  # a word's share is counted in this many slices of this many rows, spread over the store


class FullTextSearch:
    """Mixed into `SQLiteStore`: BM25 candidates, read while dense search holds the store's connection."""

    path: Path
    _readers_lock: threading.Lock
    _idle_readers: list[sqlite3.Connection] | None

    def _lexical(self, query: Query, allowed: np.ndarray | None) -> list[tuple[int, float, float]]:
        """BM25 of the scope's rows matching any word; in a large store (`PAIRED_ROWS`), of the rows that
        `large_store_matches` finds first."""
        terms = query_terms(query.text)
        if not terms:
            return []
        where = ["e.workspace = ?", "e.peer = ?", "e.agent = ?"]
        where.append("superseded_at IS NULL" if query.as_of is None else AS_OF)
        params = [query.workspace, query.peer, query.agent] + ([] if query.as_of is None else [query.as_of] * 3)
        if allowed is not None:
            where.append(f"e.rowid IN ({', '.join(str(int(r)) for r in allowed)})")
        sql = (
            "SELECT e.rowid, -f.rank, e.occurred_at FROM episodes_fts f JOIN episodes e ON e.rowid = f.rowid "
            f"WHERE f.episodes_fts MATCH ? AND {' AND '.join(where)} ORDER BY f.rank LIMIT ?"
        )
        wanted, rows, weight = candidate_count(query.k), [], 1
        with self._reader_connection() as db:
            newest, tried = newest_rowid(db), [(False, tuple(terms))]
            if allowed is None and newest >= PAIRED_ROWS:
                held = held_rows(db, terms, newest) if len(terms) > 2 else dict.fromkeys(terms, 0.0)  # both stay
                tried = large_store_matches(terms, held, newest, wanted, COMMON_SHARE, fill=False)
            for paired, words in tried:
                expression, weight = (fts_pairs(words), len(words) - 1) if paired else (fts_any(words), 1)
                rows = db.execute(sql, [expression, *params, wanted]).fetchall()
                if len(rows) >= wanted:
                    break
        return [(int(r[0]), float(r[1]) / weight, float(r[2])) for r in rows]  # each word's BM25 counted once

    @contextmanager
    def _reader_connection(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection of the full-text stage's own, so that it runs while dense search holds `_db`."""
        with self._readers_lock:
            if self._idle_readers is None:
                raise sqlite3.ProgrammingError(f"{self.path}: the episode store is closed")
            db = self._idle_readers.pop() if self._idle_readers else None
        if db is None:
            db = connect(self.path)
            db.execute("PRAGMA query_only = ON")
        try:
            yield db
        finally:
            with self._readers_lock:
                if self._idle_readers is not None:
                    self._idle_readers.append(db)
                    db = None
            if db is not None:  # the store closed meanwhile
                db.close()


def held_rows(db: sqlite3.Connection, terms: list[str], newest: int) -> dict[str, float]:
    """About how many rows hold each word, from counts in `SLICES` slices of `SLICE_ROWS` rows spread over the store."""
    width = max(1, min(SLICE_ROWS, newest // SLICES))
    ends = sorted({newest * (i + 1) // SLICES for i in range(SLICES)})
    sql = "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ? AND rowid > ? AND rowid <= ?"
    counted = {t: sum(db.execute(sql, [f'"{t}"', end - width, end]).fetchone()[0] for end in ends) for t in terms}
    return {t: count * newest / (width * len(ends)) for t, count in counted.items()}
