"""An HNSW index (usearch) over the current episodes' embeddings, persisted beside the SQLite file: a cache.

Keys are episode rowids; vectors are stored as float16 (int8 storage lost a tenth of
recall@10 against exact search). The index is saved as `<db>.usearch` with a `<db>.usearch.json`
sidecar naming the newest rowid, vector version and generation it covers, and is opened
memory-mapped (`view=True`): a new process answers its first query without loading anything.
This process only maps and searches: every write of the file (build, compaction, forget) runs
in a child process (`ann_writer`), so a native abort there costs one warning and a rebuild, never
the user's process, and a file is mapped only when its sidecar vouches for it (format, size).
Rows stored after the save ("pending": newer rowids, or vectors set later) are scored exactly
from their SQLite blobs; rows deleted or superseded in this process are left out. Once enough
pending rows pile up, `compact` runs the writer in a background thread; a delete runs it at once
(`sync`), so a forgotten episode's vector has left the file when `forget` returns.
Callers verify every candidate against SQLite (scope, current, has a vector) and rescore it in
float32, so a stale entry can never be returned.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .ann_writer import CONNECTIVITY as CONNECTIVITY  # re-exported for the benches
from .ann_writer import CURRENT, FILLER_KEYS, index_paths, read_sidecar, unpack
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
# (`ann_writer` builds with them.)
# The search beam grows with the index, one step per this many rows, up to the configured `expansion`: at 100k
# and 500k rows a beam of 150 (the candidates asked for, usearch's floor) held the whole exact top 10, and at 100k
# took 4.9 ms against 7.4-8.0 ms at 256; at 1M 160 held 0.976 and 250-256 0.996.
ROWS_PER_BEAM_STEP = 4_000
COMPACT_PENDING = 2_000  # pending rows that trigger a compaction


def search_beam(rows: int, most: int) -> int:
    """The HNSW search beam for an index of this many rows: one step per `ROWS_PER_BEAM_STEP`, from 64 up to `most`."""
    return min(most, max(64, rows // ROWS_PER_BEAM_STEP))


def usearch_index() -> type[Index]:
    """usearch's Index class, imported on first use: a store below the ANN size never pays its ~50 ms."""
    from usearch.index import Index

    return Index


class AnnIndex:
    """The persisted HNSW index of one store, mapped read-only; see the module docstring."""

    def __init__(self, db_path: Path, dim: int, *, expansion: int) -> None:
        self.db_path = Path(db_path)
        self.path, self.meta_path = index_paths(db_path)
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
        self.writing = threading.Lock()  # one writer child at a time from this process
        self.worker: threading.Thread | None = None

    def __len__(self) -> int:
        return 0 if self.index is None else len(self.index)

    # --- files ------------------------------------------------------------------------

    def open(self) -> bool:
        """Map the saved file if its sidecar vouches for it; False when missing or set aside (then it needs `build`)."""
        if not self.path.exists():
            return False
        try:
            meta = read_sidecar(self.db_path) or _after_a_moment(self.db_path)  # a writer may be between its renames
            if meta is None:
                raise ValueError("no sidecar vouches for it (missing, older format, another file, removed slots)")
            if int(meta["dim"]) != self.dim:
                raise ValueError(f"dimension {meta['dim']}, expected {self.dim}")
            index = self._mapped()
            if index is None or index.ndim != self.dim or len(index) != int(meta["count"]):
                raise ValueError("the index does not match its sidecar")
        except (OSError, ValueError, KeyError, TypeError, RuntimeError) as error:
            log.warning("episodic: rebuilding the ANN index %s: %s", self.path, error)
            return False
        self._adopt(index, meta, set())
        return True

    def _mapped(self) -> Index | None:
        """The saved file, memory-mapped, with the search beam for its size (a saved file keeps neither beam width)."""
        index = usearch_index().restore(str(self.path), view=True)
        if index is not None:
            index.expansion_search = search_beam(len(index), self.expansion)
        return index

    def _adopt(self, index: Index | None, meta: dict[str, Any], removed_before: set[int]) -> None:
        """Serve this mapped file from now on (rows removed since `removed_before` was taken stay left out)."""
        with self.lock:
            self.index = index
            self.covered_rowid = self.seen_rowid = int(meta["rowid"])
            self.covered_vectors = self.seen_vectors = int(meta["vectors"])
            self.generation = int(meta["generation"])
            self.pending = {}
            self.removed -= removed_before

    def build(self, stop: threading.Event | None = None, progress: Callable[[int], None] | None = None) -> bool:
        """Write the file from the store (kept and updated when usable, else rebuilt) and map it; False when stopped."""
        return self.sync(stop=stop, progress=progress)

    def sync(
        self,
        *,
        rebuild: bool = False,
        stop: threading.Event | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> bool:
        """Bring the file up to the store in a child process and map it; False when `stop` ended the child.

        A child that fails or dies (a native abort) is run once more, rebuilding from the store; a second
        failure raises `RuntimeError`.
        """
        with self.writing:
            with self.lock:
                removed = set(self.removed)
            error = ""
            for again in (False, True):
                meta, error = self._run_writer(rebuild=rebuild or again, stop=stop, progress=progress)
                if stop is not None and stop.is_set():
                    return False
                if meta is not None:
                    break
                if not again:
                    log.warning("episodic: the ANN index writer failed (%s); rebuilding %s", error, self.path)
            else:
                raise RuntimeError(f"could not write the ANN index {self.path}: {error}")
            if meta.get("rebuilt") == "unusable file":
                log.info("episodic: rebuilt the ANN index %s from the store", self.path)
            self._adopt(self._mapped(), meta, removed)
        return True

    def _run_writer(
        self, *, rebuild: bool, stop: threading.Event | None, progress: Callable[[int], None] | None
    ) -> tuple[dict[str, Any] | None, str]:
        """Run `ann_writer` once: (its sidecar, "") or (None, why it failed)."""
        command = [sys.executable, "-m", "thoth_episodic.ann_writer", str(self.db_path), str(self.dim)]
        with tempfile.TemporaryFile(mode="w+") as errors:
            child = subprocess.Popen(
                [*command, *(["--rebuild"] if rebuild else [])],
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                env=_child_env(),
            )
            if stop is not None:
                threading.Thread(target=_kill_when, args=(child, stop), daemon=True).start()
            last = ""
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith("progress ") and progress is not None:
                    progress(int(line.split()[1]))
                elif line.strip():
                    last = line
            code = child.wait()
            errors.seek(0)
            said = [line for line in errors.read().splitlines() if line.strip()]
        if code == 0:
            try:
                return dict(json.loads(last)), ""
            except ValueError:
                return None, f"unexpected output {last[:200]!r}"
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit {code}"
        return None, f"{how}: {said[-1]}" if said else how

    def compact(self) -> None:
        """Fold pending rows and removals into the saved file (and drop rows other processes deleted)."""
        self.sync()

    def compact_soon(self, *, force: bool = False) -> None:
        """Start a background compaction when enough rows wait, or `force`."""
        with self.lock:
            due = force or len(self.pending) >= COMPACT_PENDING
            if not due or self.index is None or (self.worker is not None and self.worker.is_alive()):
                return
            self.worker = threading.Thread(target=self._compact_logged, daemon=True, name="episodic-ann-compact")
            self.worker.start()

    def _compact_logged(self) -> None:
        try:
            self.compact()
        except Exception:  # a failure to persist is never silent
            log.exception("episodic: could not save the ANN index %s", self.path)

    def wait(self) -> None:
        """Wait for a background compaction."""
        worker = self.worker
        if worker is not None:
            worker.join()

    def check(self) -> str | None:
        """Whether the file agrees with the store, checked in a child process: None when it does, else what is wrong."""
        command = [sys.executable, "-m", "thoth_episodic.ann_writer", str(self.db_path), str(self.dim), "--check"]
        done = subprocess.run(command, capture_output=True, text=True, env=_child_env(), check=False)
        if done.returncode < 0:
            return f"reading it ended its reader with signal {signal.Signals(-done.returncode).name}"
        if done.returncode:
            return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return json.loads(done.stdout).get("problem")

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
            keys, matrix = unpack(rows, self.dim)
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
                real = keys < FILLER_KEYS  # fillers hold the slots of removed rows
                keys, similarity = keys[real], similarity[real]
            if pending:  # a pending row's vector is newer than the file's (re-embedded): it is not a candidate twice
                waiting = np.fromiter(pending, dtype=np.int64, count=len(pending))
                stale = np.isin(keys, waiting)
                keys, similarity = np.concatenate([keys[~stale], waiting]), similarity[~stale]
                similarity = np.concatenate([similarity, np.stack(list(pending.values())) @ vector])
            if removed:
                kept = ~np.isin(keys, np.fromiter(removed, dtype=np.int64))
                keys, similarity = keys[kept], similarity[kept]
            return keys[np.argsort(-similarity, kind="stable")[:count]]


def _after_a_moment(db_path: Path) -> dict[str, Any] | None:
    """The sidecar read again shortly (a writer renames the file, then its sidecar)."""
    time.sleep(0.05)
    return read_sidecar(db_path)


def _child_env() -> dict[str, str]:
    """The environment of a writer child: this package importable whatever the parent's path."""
    here = str(Path(__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}


def _kill_when(child: subprocess.Popen[str], stop: threading.Event) -> None:
    """Kill the child once `stop` is set (checked while it runs)."""
    while child.poll() is None:
        if stop.wait(0.2):
            child.kill()
            return
