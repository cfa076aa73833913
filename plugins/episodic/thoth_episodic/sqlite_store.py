"""The default backend: one SQLite file (WAL) with episodes, Float32 BLOB embeddings and FTS5.

Every version of an episode is a row (bitemporal, see `records`). BM25 comes from an FTS5
table (the turn, its neighbour turns, its date; `sqlite_fts`); the scope filter joins the matches with
their rows, so its cost follows the matches, not the size of the scope. Dense search goes
through an HNSW index (`ann_index`, `ann_search`, `sqlite_ann`) once the store has `ann_min_rows` rows
(`ann = "auto"`; `"usearch"`: always; `"exact"`: never), and is exact otherwise and for
as-of queries (`VectorCache.top`): every row's embedding, kept in memory and
refreshed incrementally: new rowids are appended; vectors set later (by the background
embedder or a reindex) carry a `vector_version` and only those rows are reloaded; a delete
or supersede bumps a generation counter in `meta` and the next search reloads everything.
The full-text stage reads on read-only connections of its own (a few, kept open), so it runs
while dense search uses the store's connection. A turn has at most one current episode (a
unique index on workspace, peer and turn id), so a post-turn write replayed after a crash
stores nothing new. A rowid is never given twice (`AUTOINCREMENT`, `sqlite_rowids`): the ANN files'
covered marks rely on it. Several processes may share the
file; each refreshes before it searches. Reads are scoped to one agent (`agent` column, the
vector cache's scope is workspace, peer and agent); deletes are not. Commits use WAL with `synchronous=NORMAL`
(configurable): a committed write survives the process being killed, which
`tests/test_crash.py` checks with SIGKILL.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from thoth_core.database import SqliteDatabase
from thoth_core.storage import scrub

from .ann_index import AnnIndex
from .episode_table import CHUNK_IDS, FIELDS, EpisodeTable, columns, marks
from .memory import LIMIT, STORE_OPTIONS
from .records import Episode, Hit, Query
from .scoring import candidate_count, date_words, index_text, rank
from .sqlite_ann import IndexedSearch
from .sqlite_fts import FullTextSearch
from .sqlite_rowids import writers_held
from .sqlite_schema import MIGRATIONS
from .vector_cache import VectorCache

if TYPE_CHECKING:
    from thoth_core import Runtime

ANN_MODES = ("auto", "exact", "usearch")
# A forget's delete touches pages all over the file (a peer's rows are interleaved with the others'): with the
# default 2 MiB cache it spills and rewrites them; with 128 MiB, 10,000 of 200,000 rows were deleted in 0.55 s
# instead of 1.2 s (FTS5 and table deletes; bench/episodic_forget.py). The cache is only this large meanwhile.
DELETE_CACHE_KIB = 131_072
ANN_MIN_ROWS = 20_000  # `ann = "auto"` indexes stores from this many rows (see the README's measurements)
# FTS5's `rank` column computes bm25 once per match and lets the table sort (about 2x faster
# than calling bm25() in SELECT and ORDER BY). Weights: body, context (neighbour turns), dates.
RANK = "INSERT INTO episodes_fts (episodes_fts, rank) VALUES ('rank', 'bm25(1.0, 0.4, 0.5)')"
COLUMNS = columns("user")
SCOPE = "workspace || char(0) || peer || char(0) || agent"  # a vector cache scope: one agent's view of a peer


class SQLiteStore(EpisodeTable, IndexedSearch, FullTextSearch):
    """Episodes in one SQLite file (a `thoth_core.database.SqliteDatabase`); see the module docstring."""

    embeds_late = True  # `search` embeds the query while its full-text stage runs
    TABLE, COLUMNS = "episodes", COLUMNS
    database: SqliteDatabase

    def __init__(
        self,
        path: Path | str,
        *,
        dim: int = 384,
        synchronous: str = "NORMAL",
        ann: str = "exact",
        ann_min_rows: int = ANN_MIN_ROWS,
        ann_expansion: int = STORE_OPTIONS["ann_expansion"],
    ) -> None:
        self.path = Path(path)
        self.ann, self.ann_min_rows = ann, ann_min_rows
        self.dim = dim
        self.database = SqliteDatabase(
            self.path,
            MIGRATIONS,
            synchronous=synchronous,
            while_migrating=lambda: writers_held(self.path, migrating=True),
        )
        self._db, self._lock = self.database.db, self.database.guard  # the dialect's own statements (FTS5, ANN files)
        with self._lock:
            if self._db.execute("SELECT count(*) FROM episodes_fts_config WHERE k = 'rank'").fetchone()[0] == 0:
                self._db.execute(RANK)
        self._cache = VectorCache(dim)
        self._index = (
            None
            if ann == "exact"
            else AnnIndex(self.path, dim, expansion=ann_expansion, min_rows=self.ann_scope_rows())
        )
        self._index_ready = self._index is not None and self._index.open()
        if self._index is not None and self._index_ready and self._index.generation != self._counter("generation"):
            self._index.compact_soon(force=True)  # rows deleted since the save leave the file
        self._building: threading.Thread | None = None
        self._stop_building = threading.Event()
        self._readers_lock = threading.Lock()  # not `_lock`: the full-text stage must not wait for the writer
        self._idle_readers: list[sqlite3.Connection] | None = []  # None once closed; the last returned first (warm)

    def _counter(self, key: str) -> int:
        with self._lock:
            return int(self._db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = ?", (key,)).fetchone()[0])

    # --- writing ----------------------------------------------------------------------

    def _bump(self) -> int:
        """Count a delete or supersede; returns the new generation."""
        found = self._db.execute(
            "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation' RETURNING value"
        ).fetchone()
        return int(found[0])

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes in one transaction; a changed known id supersedes its old version.

        An episode for a turn that already has a current episode under another id is not stored,
        unless it is the whole reply of a turn kept cut short: it then takes that episode's id and
        neighbour context and supersedes it (`_takes_turn`).
        """
        stored: list[Episode] = []
        superseded: list[tuple[int, tuple[str, str, str]]] = []
        now = time.time()
        with self.database.transaction():
            for i, episode in enumerate(episodes):
                if not self._takes_turn(episode):
                    continue
                old = self._current(episode.id)
                if old is not None and old.same_content(episode):
                    continue
                if old is not None:
                    gone = self._db.execute(
                        "UPDATE episodes SET superseded_at = ? WHERE id = ? AND superseded_at IS NULL RETURNING rowid",
                        (now, episode.id),
                    ).fetchall()
                    if self._index is not None:
                        self._index.remove([r[0] for r in gone])
                    superseded.append((self._bump(), (old.workspace, old.peer, old.agent)))
                    episode.recorded_at = max(episode.recorded_at, now)
                blob = None if vectors is None else np.ascontiguousarray(vectors[i], dtype=np.float32).tobytes()
                if self._insert(episode, blob):
                    stored.append(episode)
        if self._index is not None:
            for generation, scope in superseded:  # the next compaction looks at these scopes only
                self._index.note(generation, {scope})
        return stored

    def _insert(self, episode: Episode, blob: bytes | None) -> bool:
        values = [getattr(episode, name) for name in FIELDS]
        cursor = self._db.execute(  # `_takes_turn` ran in this transaction: the conflict clause is a safety net
            f"INSERT INTO episodes ({COLUMNS}, embedding) VALUES ({', '.join('?' * 18)}) ON CONFLICT DO NOTHING",
            [*values, blob],
        )
        if not cursor.rowcount:
            return False
        self._db.execute(
            "INSERT INTO episodes_fts (rowid, body, context, dates) VALUES (?, ?, ?, ?)",
            (
                cursor.lastrowid,
                index_text(episode),
                episode.context,
                date_words(episode.occurred_at),
            ),
        )
        return True

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the indexed neighbour context of the current version."""
        with self._lock:
            row = self._db.execute(
                "SELECT rowid FROM episodes WHERE id = ? AND superseded_at IS NULL", (episode_id,)
            ).fetchone()
            if row is None:
                return
            with self.database.transaction():
                self._db.execute("UPDATE episodes SET context = ? WHERE rowid = ?", (context, row[0]))
                self._db.execute("UPDATE episodes_fts SET context = ? WHERE rowid = ?", (context, row[0]))

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions of these episodes (caches reload only those)."""
        with self.database.transaction():
            version = self._db.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'vectors' RETURNING value"
            ).fetchone()[0]
            self._db.executemany(
                "UPDATE episodes SET embedding = ?, vector_version = ? WHERE id = ? AND superseded_at IS NULL",
                [
                    (np.ascontiguousarray(vector, dtype=np.float32).tobytes(), version, episode_id)
                    for episode_id, vector in zip(ids, vectors, strict=True)
                ],
            )

    @contextmanager
    def _delete_cache(self) -> Iterator[None]:
        """A page cache of `DELETE_CACHE_KIB` for a big delete and its scrub, the usual one after."""
        with self._lock:
            usual = self._db.execute("PRAGMA cache_size").fetchone()[0]
            self._db.execute(f"PRAGMA cache_size = -{DELETE_CACHE_KIB}")
            try:
                yield
            finally:
                self._db.execute(f"PRAGMA cache_size = {int(usual)}")

    def _delete_where(self, where: str, params: Sequence[Any], *, forget: bool) -> int:
        with self._delete_cache():
            with self.database.transaction():
                rows = self._db.execute(
                    f"SELECT rowid, id, workspace, peer, agent FROM episodes WHERE {where}", list(params)
                ).fetchall()
                for start in range(0, len(rows), CHUNK_IDS):
                    chunk = [r[0] for r in rows[start : start + CHUNK_IDS]]
                    self._db.execute(f"DELETE FROM episodes_fts WHERE rowid IN ({marks(len(chunk))})", chunk)
                    self._db.execute(f"DELETE FROM episodes WHERE rowid IN ({marks(len(chunk))})", chunk)
                deleted = self._bump() if rows else 0
            if rows:  # out of the index files before this returns
                self._erase_from_index([(r[0], r[2], r[3], r[4]) for r in rows], deleted)
            if rows and forget:  # the text must not survive in FTS5 segments, free pages or the WAL
                scrub(self._db, fts=["episodes_fts"])
        return len({r[1] for r in rows})

    # --- search -----------------------------------------------------------------------

    def refresh(self) -> VectorCache:
        """Bring the vector cache up to date with the file (other processes included) and return it."""
        with self._lock:
            counters = dict(self._db.execute("SELECT key, CAST(value AS INTEGER) FROM meta").fetchall())
            cache = self._cache
            if counters["generation"] != cache.generation:
                rows = self._db.execute("SELECT count(*) FROM episodes").fetchone()[0]
                cache = self._cache = VectorCache(self.dim, capacity=rows + 1024)
                cache.generation, cache.vectors_version = counters["generation"], counters["vectors"]
            while True:
                rows = self._db.execute(
                    f"SELECT rowid, {SCOPE}, occurred_at, recorded_at, superseded_at, embedding "
                    "FROM episodes WHERE rowid > ? ORDER BY rowid LIMIT 20000",
                    (cache.last_rowid,),
                ).fetchall()
                if not rows:
                    break
                cache.append(rows)
            if counters["vectors"] != cache.vectors_version:
                cache.set_vectors(
                    self._db.execute(
                        "SELECT rowid, embedding FROM episodes WHERE vector_version > ?", (cache.vectors_version,)
                    ).fetchall()
                )
                cache.vectors_version = counters["vectors"]
            return cache

    def _visible(self, cache: VectorCache, query: Query, allowed: np.ndarray | None) -> np.ndarray:
        """Which cached rows dense search may return: in scope, current (or as of), with a vector."""
        mask = cache.mask(f"{query.workspace}\0{query.peer}\0{query.agent}", query.as_of)
        if allowed is not None:
            rowids = cache.rowids[: cache.size]  # ascending: rows are appended in rowid order
            positions = np.clip(np.searchsorted(rowids, allowed), 0, max(cache.size - 1, 0))
            keep = np.zeros(cache.size, dtype=bool)
            keep[positions[rowids[positions] == allowed]] = True
            mask &= keep
        return mask

    def _dense(self, cache: VectorCache, query: Query, mask: np.ndarray) -> list[tuple[int, float, float]]:
        if query.vector is None:
            return []
        positions, scores = cache.top(np.asarray(query.vector, dtype=np.float32), mask, candidate_count(query.k))
        rowids, occurred = cache.rowids[positions], cache.occurred[positions]
        return [(int(r), float(s), float(o)) for r, s, o in zip(rowids, scores, occurred, strict=True)]

    def _newest(self, query: Query) -> np.ndarray | None:
        if not query.newest:
            return None
        with self._lock:
            rows = self._db.execute(
                "SELECT rowid FROM episodes WHERE workspace = ? AND peer = ? AND agent = ? AND superseded_at IS NULL "
                "ORDER BY occurred_at DESC LIMIT ?",
                (query.workspace, query.peer, query.agent, query.newest),
            ).fetchall()
        return np.array([r[0] for r in rows], dtype=np.int64)

    def search(self, query: Query) -> list[Hit]:
        """Hybrid recall over the whole scope (or its newest `query.newest` episodes)."""
        allowed = self._newest(query)
        index = self._usable_index() if query.as_of is None else None
        lexical = _LEXICAL_POOL.submit(self._lexical, query, allowed)  # on its own connection; SQLite frees the GIL
        query = query.with_vector()  # embedded meanwhile; this waits for vectors still queued, so refresh after it
        if index is not None:
            dense = self._indexed_dense(query, allowed)
        else:  # exact search over the in-memory vector cache (as-of queries always)
            cache = self.refresh()
            dense = self._dense(cache, query, self._visible(cache, query, allowed))
        return rank(query, dense, lexical.result(), self._load_rows)

    def close(self) -> None:
        """Save the index when it holds forgotten rows (waiting for background work), close the connection."""
        if self._building is not None:  # a build still running is abandoned (at most one batch): the next open builds
            self._stop_building.set()
            self._building.join()
        if self._index is not None:
            self._index.wait()
            if self._index_ready and self._index.removed:  # superseded rows
                self._index.compact()
        with self._readers_lock:
            idle, self._idle_readers = self._idle_readers or [], None
        for reader in idle:  # one in use is closed when its search returns it
            reader.close()
        self.database.close()


_LEXICAL_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="episodic-bm25")


def sqlite_backend(runtime: Runtime, options: dict[str, Any]) -> SQLiteStore:
    """Factory registered as `sqlite`: `[plugins.episodic] path` (relative to $THOTH_HOME), `synchronous`, `ann`."""
    options = {**STORE_OPTIONS, **options}
    path = Path(runtime.home) / str(options["path"] or STORE_OPTIONS["path"])  # an absolute path stays as it is
    ann = options["ann"] or "auto"
    if ann not in ANN_MODES:
        raise runtime.config.error("plugins.episodic.ann", f'expected "auto", "exact" or "usearch", got {ann!r}')
    synchronous = str(options["synchronous"]).upper()
    if synchronous not in ("NORMAL", "FULL", "EXTRA"):
        raise runtime.config.error(
            "plugins.episodic.synchronous", f"expected NORMAL, FULL or EXTRA, got {synchronous!r}"
        )
    return SQLiteStore(
        path,
        dim=int(options.get("dim", 384)),
        synchronous=synchronous,
        ann=ann,
        ann_min_rows=runtime.config.integer("plugins.episodic.ann_min_rows", options["ann_min_rows"], high=LIMIT),
        ann_expansion=runtime.config.integer(
            "plugins.episodic.ann_expansion", options["ann_expansion"], low=1, high=4096
        ),
    )
