"""An HNSW index (usearch) over the current episodes' embeddings, persisted beside the SQLite file.

Keys are episode rowids; vectors are stored as float16 (int8 storage lost a tenth of
recall@10 against exact search). The index is saved as `<db>.usearch` with a `<db>.usearch.json`
sidecar naming the newest rowid, vector version and generation it covers, and is opened
memory-mapped (`view=True`): a new process answers its first query without loading anything.
Rows stored after the save ("pending": newer rowids, or vectors set later) are scored exactly
from their SQLite blobs; rows deleted or superseded in this process are left out. Once enough
pending rows or any removal pile up, `compact` (in a background thread) loads a writable copy,
applies them, saves atomically and maps the new file, so a forgotten episode's vector leaves
the file on the next save. A missing or unreadable file is rebuilt from SQLite (one log line).
Callers verify every candidate against SQLite (scope, current, has a vector) and rescore it in
float32, so a stale entry can never be returned.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .sqlite_schema import newest_rowid

if TYPE_CHECKING:
    from usearch.index import Index

log = logging.getLogger(__name__)

# Graph degree and insert beam: at 1M clustered vectors (bench/episodic_latency.py) 16 and 64 held 0.92 of the
# exact top 10 among 50 candidates, and no search beam lifted it past 0.94; 24 and 96 held 0.974-0.988 (search
# beam 256, over five multi-threaded builds, whose graphs differ) and 0.994-0.998 (400, two builds), for a
# build 1.4x as long (368 s against 263 s on 2 cores; on one thread, below, 1,364 s on a machine twice as slow).
# Built on one thread, the same data held 0.996 at beams 192 and 256, 0.997 at 400 and 0.976 at 160: the
# stranded nodes below had cost the multi-threaded graphs their recall, so the search beam is back at 256.
CONNECTIVITY = 24
EXPANSION_ADD = 96
# The search beam grows with the index, one step per this many rows, up to the configured `expansion`: at 100k
# and 500k rows a beam of 150 (the candidates asked for, usearch's floor) held the whole exact top 10, and at 100k
# took 4.9 ms against 7.4-8.0 ms at 256; at 1M 160 held 0.976 and 250-256 0.996.
ROWS_PER_BEAM_STEP = 4_000
# One inserting thread: concurrent adds leave some nodes stored but unreachable by search (usearch issue #735,
# unfixed in 2.25/2.26); on two threads 0.03-0.13% of rows were never found even as their own nearest neighbour.
ADD_THREADS = 1
COMPACT_PENDING = 2_000  # pending rows that trigger a compaction
CURRENT = "superseded_at IS NULL AND embedding IS NOT NULL"

Connect = Callable[[], sqlite3.Connection]  # a fresh connection to the store, for background work


def search_beam(rows: int, most: int) -> int:
    """The HNSW search beam for an index of this many rows: one step per `ROWS_PER_BEAM_STEP`, from 64 up to `most`."""
    return min(most, max(64, rows // ROWS_PER_BEAM_STEP))


def usearch_index() -> type[Index]:
    """usearch's Index class, imported on first use: a store below the ANN size never pays its ~50 ms."""
    from usearch.index import Index

    return Index


class AnnIndex:
    """The persisted HNSW index of one store; see the module docstring."""

    def __init__(self, db_path: Path, dim: int, *, expansion: int) -> None:
        self.path = Path(f"{db_path}.usearch")
        self.meta_path = Path(f"{db_path}.usearch.json")
        self.dim, self.expansion = dim, expansion
        self.index: Index | None = None
        self.covered_rowid = 0  # rows up to this rowid were in the saved file
        self.covered_vectors = 0  # vectors set up to this version were in the saved file
        self.generation = -1  # the store's delete/supersede counter when the file was saved
        self.pending: dict[int, np.ndarray] = {}  # rowid -> float32 vector not in the file
        self.seen_rowid = 0
        self.seen_vectors = 0
        self.removed: set[int] = set()
        self.lock = threading.RLock()
        self.worker: threading.Thread | None = None

    def __len__(self) -> int:
        return 0 if self.index is None else len(self.index)

    # --- files ------------------------------------------------------------------------

    def open(self) -> bool:
        """Map the saved index; False when it is missing or unreadable (then it needs `build`)."""
        if not self.path.exists():
            return False
        try:
            meta = json.loads(self.meta_path.read_text())
            if int(meta["dim"]) != self.dim:
                raise ValueError(f"dimension {meta['dim']}, expected {self.dim}")
            index = self._mapped()
            if index is None or index.ndim != self.dim or len(index) != int(meta["count"]):
                raise ValueError("the index does not match its sidecar")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
            log.warning("episodic: rebuilding the ANN index %s: %s", self.path, error)
            return False
        with self.lock:
            self.index = index
            self.covered_rowid = self.seen_rowid = int(meta["rowid"])
            self.covered_vectors = self.seen_vectors = int(meta["vectors"])
            self.generation = int(meta["generation"])
            self.pending, self.removed = {}, set()
        return True

    def _mapped(self) -> Index | None:
        """The saved file, memory-mapped, with the search beam for its size (a saved file keeps neither beam width)."""
        index = usearch_index().restore(str(self.path), view=True)
        if index is not None:
            index.expansion_search = search_beam(len(index), self.expansion)
        return index

    def _save(self, index: Index, rowid: int, vectors: int, generation: int) -> None:
        """Write the index and its sidecar, each by an atomic rename."""
        unique = f"{os.getpid()}.{threading.get_ident()}.tmp"  # two processes may save at once
        temporary = self.path.with_name(f"{self.path.name}.{unique}")
        index.save(str(temporary))
        meta = {"dim": self.dim, "count": len(index), "rowid": rowid, "vectors": vectors, "generation": generation}
        meta_temporary = self.meta_path.with_name(f"{self.meta_path.name}.{unique}")
        meta_temporary.write_text(json.dumps(meta))
        os.replace(temporary, self.path)
        os.replace(meta_temporary, self.meta_path)

    def _new(self) -> Index:
        return usearch_index()(
            ndim=self.dim,
            metric="ip",
            dtype="f16",
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
        )

    def build(
        self, connect: Connect, stop: threading.Event | None = None, progress: Callable[[int], None] | None = None
    ) -> None:
        """(Re)build the whole index from the store's current rows and save it; a set `stop` abandons it unsaved.

        Rows written after the scan read past them are left to `catch_up` (they are not counted as seen).
        """
        db = connect()
        try:
            vectors, generation = _counters(db)
            index, last = self._new(), 0
            while True:
                if stop is not None and stop.is_set():
                    return
                rows = db.execute(
                    f"SELECT rowid, embedding FROM episodes WHERE rowid > ? AND {CURRENT} ORDER BY rowid LIMIT 5000",
                    (last,),
                ).fetchall()
                if not rows:
                    break
                keys, matrix = _unpack(rows, self.dim)
                if len(keys):
                    index.add(keys, matrix, threads=ADD_THREADS)
                last = int(rows[-1][0])
                if progress is not None:
                    progress(len(rows))
        finally:
            db.close()
        self._save(index, last, vectors, generation)
        self.open()

    def compact(self, connect: Connect) -> None:
        """Fold pending rows and removals into the saved file (and drop rows other processes deleted)."""
        with self.lock:
            pending, removed = dict(self.pending), set(self.removed)
            rowid, vectors, generation = self.seen_rowid, self.seen_vectors, self.generation
        index = usearch_index().restore(str(self.path))  # a writable copy; the mapped one keeps serving
        index.expansion_add = EXPANSION_ADD
        db = connect()
        try:
            _, now = _counters(db)
            if now != generation:  # another process deleted or superseded rows: keep only current ones
                keys = np.asarray(index.keys, dtype=np.int64)
                alive = set()
                for start in range(0, len(keys), 50_000):
                    chunk = [int(k) for k in keys[start : start + 50_000]]
                    marks = ", ".join("?" * len(chunk))
                    found = db.execute(f"SELECT rowid FROM episodes WHERE rowid IN ({marks}) AND {CURRENT}", chunk)
                    alive.update(r[0] for r in found)
                removed |= {int(k) for k in keys if int(k) not in alive}
        finally:
            db.close()
        gone = [k for k in removed | set(pending) if k in index]
        if gone:
            index.remove(gone)
        if pending:
            keys = np.fromiter(pending, dtype=np.int64)
            index.add(keys, np.stack([pending[int(k)] for k in keys]), threads=ADD_THREADS)
        self._save(index, rowid, vectors, now)
        with self.lock:
            self.index = self._mapped()
            self.covered_rowid, self.covered_vectors, self.generation = rowid, vectors, now
            for key in pending:
                if self.pending.get(key) is pending[key]:
                    del self.pending[key]
            self.removed -= removed

    def compact_soon(self, connect: Connect, *, removals: bool = False, force: bool = False) -> None:
        """Start a background compaction when enough changes wait (any removal counts), or `force`."""
        with self.lock:
            due = force or (self.removed if removals else len(self.pending) >= COMPACT_PENDING)
            if not due or self.index is None or (self.worker is not None and self.worker.is_alive()):
                return
            self.worker = threading.Thread(target=self._compact_logged, args=(connect,), daemon=True)
            self.worker.start()

    def _compact_logged(self, connect: Connect) -> None:
        try:
            self.compact(connect)
        except Exception:  # a failure to persist is never silent
            log.exception("episodic: could not save the ANN index %s", self.path)

    def wait(self) -> None:
        """Wait for a background compaction."""
        worker = self.worker
        if worker is not None:
            worker.join()

    # --- keeping up with the store ----------------------------------------------------

    def catch_up(self, db: sqlite3.Connection) -> None:
        """Note rows stored (or given a vector) since the last look, as pending."""
        with self.lock:
            vectors = int(db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vectors'").fetchone()[0])
            last = newest_rowid(db)  # read first:
            rows = db.execute(  # a row committed after it is left to the next look, never skipped
                f"SELECT rowid, embedding FROM episodes WHERE rowid > ? AND rowid <= ? AND {CURRENT}",
                (self.seen_rowid, last),
            ).fetchall()
            if vectors != self.seen_vectors:
                rows += db.execute(
                    f"SELECT rowid, embedding FROM episodes WHERE vector_version > ? AND rowid <= ? AND {CURRENT}",
                    (self.seen_vectors, self.seen_rowid),
                ).fetchall()
                self.seen_vectors = vectors
            self.seen_rowid = max(self.seen_rowid, last)
            keys, matrix = _unpack(rows, self.dim)
            for key, vector in zip(keys.tolist(), matrix, strict=True):
                self.pending[key] = vector
                self.removed.discard(key)

    def remove(self, rowids: list[int]) -> None:
        """Leave these rows out from now on (deleted or superseded)."""
        with self.lock:
            for rowid in rowids:
                self.pending.pop(rowid, None)
                self.removed.add(rowid)

    def candidates(self, vector: np.ndarray, count: int) -> np.ndarray:
        """Rowids of up to `count` rows nearest the vector (index and pending rows), nearest first, unverified."""
        with self.lock:
            index, pending, removed = self.index, self.pending, self.removed
            keys, similarity = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            if index is not None and len(index):
                matches = index.search(vector, min(count, len(index)))
                keys = np.asarray(matches.keys, dtype=np.int64)
                similarity = 1 - np.asarray(matches.distances, dtype=np.float32)  # metric "ip": distance is 1 - ip
            if pending:
                keys = np.concatenate([keys, np.fromiter(pending, dtype=np.int64, count=len(pending))])
                similarity = np.concatenate([similarity, np.stack(list(pending.values())) @ vector])
            if removed:
                kept = ~np.isin(keys, np.fromiter(removed, dtype=np.int64))
                keys, similarity = keys[kept], similarity[kept]
            return keys[np.argsort(-similarity, kind="stable")[:count]]


def _counters(db: sqlite3.Connection) -> tuple[int, int]:
    """The store's (vector version, generation)."""
    values = dict(db.execute("SELECT key, CAST(value AS INTEGER) FROM meta").fetchall())
    return int(values["vectors"]), int(values["generation"])


def _unpack(rows: list[tuple[int, bytes]], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, float32 matrix) of rows whose blob is a vector of this dimension."""
    good = [(r, b) for r, b in rows if b is not None and len(b) == 4 * dim]
    keys = np.array([r for r, _ in good], dtype=np.int64)
    matrix = np.frombuffer(b"".join(b for _, b in good), dtype=np.float32).reshape(len(good), dim)
    return keys, matrix
