"""HNSW indexes (usearch) of the current episodes' embeddings, one per scope, saved beside the SQLite file: a cache.

Keys are episode rowids; vectors are stored as float16 (int8 storage lost a tenth of
recall@10 against exact search). Recall searches one scope (workspace, peer, agent), so each scope
with enough rows has its own file (`ann_files`: `<db>.usearch-<key>`, a sidecar each, a manifest),
opened memory-mapped (`view=True`) on the scope's first query: a new process maps only what it searches.
This process only maps and searches: every write of a file (build, compaction, forget) runs
in a child process (`ann_writer`), so a native abort there costs one warning and a rebuild, never
the user's process, and a file is mapped only when its sidecar vouches for it (format, size, header).
Rows stored after the manifest ("pending": newer rowids, or vectors set later) are scored exactly
from their SQLite blobs; rows deleted or superseded in this process are left out. Once enough
pending rows pile up, `compact` runs the writer in a background thread; a delete runs it at once
for the scopes it touched (`sync`), so a forgotten episode's vector has left every file when `forget`
returns: a forgotten peer's files are deleted, a forgotten thread's rows leave its peer's file.
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
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .ann_files import (
    Scope,
    legacy_paths,
    manifest_path,
    read_manifest,
    scope_files,
    scope_paths,
    sidecar_paths,
    sidecars,
)
from .ann_writer import CONNECTIVITY as CONNECTIVITY  # re-exported for the benches
from .ann_writer import CURRENT, FILLER_KEYS, LoadNeeded, Writer, unpack
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
    """The persisted HNSW indexes of one store, one per scope, mapped read-only; see the module docstring."""

    def __init__(self, db_path: Path, dim: int, *, expansion: int, min_rows: int = 1) -> None:
        self.db_path = Path(db_path)
        self.path = Path(f"{db_path}.usearch")  # the name the files share (and the older layout's single file)
        self.dim, self.expansion, self.min_rows = dim, expansion, max(1, min_rows)
        self.ready = False  # a manifest was adopted: every scope with rows up to `seen_rowid` has its file, or few rows
        self.files: dict[Scope, dict[str, Any]] = {}  # the sidecars of the scope files
        self.mapped: dict[Scope, tuple[Index, tuple[int, int]]] = {}  # mapped on first use, with the file's identity
        self.generation = -1  # the store's delete/supersede counter the manifest covers
        self.pending: dict[Scope, dict[int, np.ndarray]] = {}  # rowid -> float32 vector not in the scope's file
        self.pending_scope: dict[int, Scope] = {}
        self.unfiled = 0  # rows stored since the manifest in scopes without a file (they may grow into one)
        self.seen_rowid = 0
        self.seen_vectors = 0
        self.removed: set[int] = set()
        self.broken = False  # a file failed to map: the next compaction rebuilds every file
        self.changes: dict[int, set[Scope]] = {}  # generations this process made (deletes, supersedes): their scopes
        self.lock = threading.RLock()
        self.writing = threading.Lock()  # one writer child at a time from this process
        self.worker: threading.Thread | None = None

    def __len__(self) -> int:
        """Rows in the files (fillers left out)."""
        return sum(int(m["count"]) - int(m["fillers"]) for m in self.files.values())

    # --- files ------------------------------------------------------------------------

    def open(self) -> bool:
        """Adopt the saved files if their manifest vouches for them; False when they need `build` (then says why)."""
        legacy = legacy_paths(self.db_path)[0]
        if legacy.exists():
            log.info("episodic: moving the ANN index %s to one file per peer (rebuilt from the store)", legacy)
            return False
        manifest = read_manifest(self.db_path)
        problem = ""
        if manifest is None:
            problem = "no manifest vouches for the files" if scope_files(self.db_path) else ""
        elif int(manifest["dim"]) != self.dim:
            problem = f"dimension {manifest['dim']}, expected {self.dim}"
        elif int(manifest["min_rows"]) != self.min_rows:
            return False  # another `ann` mode indexed it: the writer keeps the files it can
        else:
            files = sidecars(self.db_path)
            strays = len(scope_files(self.db_path)) + len(sidecar_paths(self.db_path)) - 2 * len(files)
            if strays:
                problem = "files no sidecar vouches for (missing, unreadable, another file, removed slots)"
            else:
                self._adopt(manifest, files, set())
                return True
        if problem:
            log.warning("episodic: rebuilding the ANN index %s: %s", self.path, problem)
        return False

    def _map(self, scope: Scope) -> Index | None:
        """The scope's file, memory-mapped, with the search beam for its size (None: the scope has no file)."""
        meta = self.files.get(scope)
        if meta is None:
            return None
        path = scope_paths(self.db_path, scope)[0]
        known = self.mapped.get(scope)
        try:
            stat = path.stat()
        except FileNotFoundError:  # deleted by another process's forget: the mapping serves until the next compaction
            if known is not None:
                return known[0]
            self.files.pop(scope)
            self.compact_soon(force=True)
            return None
        identity = (stat.st_ino, stat.st_mtime_ns)
        if known is not None and known[1] == identity:
            return known[0]
        index = usearch_index().restore(str(path), view=True)
        if index is None or index.ndim != self.dim or len(index) != int(meta["count"]):
            raise ValueError(f"the index file {path} does not match its sidecar")
        index.expansion_search = search_beam(len(index), self.expansion)  # type: ignore[misc]  # setter apart
        self.mapped[scope] = (index, identity)
        return index

    def _adopt(self, manifest: dict[str, Any], files: dict[Scope, dict[str, Any]], removed_before: set[int]) -> None:
        """Serve these files from now on (rows removed since `removed_before` was taken stay left out)."""
        with self.lock:
            self.files = files
            self.mapped = {s: m for s, m in self.mapped.items() if s in files}  # remapped when the file changed
            self.seen_rowid = int(manifest["rowid"])
            self.seen_vectors = int(manifest["vectors"])
            self.generation = int(manifest["generation"])
            self.pending, self.pending_scope, self.unfiled = {}, {}, 0
            self.removed -= removed_before
            self.changes = {g: s for g, s in self.changes.items() if g > self.generation}
            self.ready = True

    def build(self, stop: threading.Event | None = None, progress: Callable[[int], None] | None = None) -> bool:
        """Write the files from the store (kept and updated when usable, else rebuilt); False when stopped."""
        return self.sync(stop=stop, progress=progress)

    def note(self, generation: int, scopes: set[Scope]) -> None:
        """A delete or supersede of this process moved the store to `generation`, touching these scopes."""
        with self.lock:
            self.changes.setdefault(generation, set()).update(scopes)

    def sync(
        self,
        *,
        rebuild: bool = False,
        erase: bool = False,
        stop: threading.Event | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> bool:
        """Bring the files up to the store in a child process and adopt them; False when `stop` ended the child.

        The scopes of the changes `note`d are looked at; `erase` (a forget) first tries it in this process,
        which only deletes files and writes JSON (whole peers). A child that fails or dies (a native abort)
        is run once more, rebuilding from the store; a second failure raises `RuntimeError`.
        """
        with self.writing:
            with self.lock:
                removed = set(self.removed)
                changes = {g: set(s) for g, s in self.changes.items()}
            if erase and not rebuild and self._sync_here(changes, removed):
                return True
            error = ""
            for again in (False, True):
                manifest, error = self._run_writer(rebuild or again, changes, stop, progress)
                if stop is not None and stop.is_set():
                    return False
                if manifest is not None:
                    break
                if not again:
                    log.warning("episodic: the ANN index writer failed (%s); rebuilding %s", error, self.path)
            else:
                raise RuntimeError(f"could not write the ANN index {self.path}: {error}")
            self._adopt(manifest, sidecars(self.db_path), removed)
        return True

    def _sync_here(self, changes: dict[int, set[Scope]], removed: set[int]) -> bool:
        """A forget that only deletes files (whole peers) in this process, without a child's start; False: it cannot."""
        writer = Writer(self.db_path, self.dim, min_rows=self.min_rows, loads=False)
        try:
            manifest = writer.run(
                rebuild=False, scopes=sorted(set().union(*changes.values())), generations=set(changes)
            )
        except LoadNeeded:
            return False
        self._adopt(manifest, sidecars(self.db_path), removed)
        return True

    def _run_writer(
        self,
        rebuild: bool,
        changes: dict[int, set[Scope]],
        stop: threading.Event | None,
        progress: Callable[[int], None] | None,
    ) -> tuple[dict[str, Any] | None, str]:
        """Run `ann_writer` once: (its manifest, "") or (None, why it failed)."""
        scopes = sorted(set().union(*changes.values()))
        command = [*self._command(), "--scopes", json.dumps([list(s) for s in scopes])]
        command += ["--generations", json.dumps(sorted(changes)), *(["--rebuild"] if rebuild else [])]
        with tempfile.TemporaryFile(mode="w+") as errors:
            child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=errors, text=True, env=_child_env())
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

    def _command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "thoth_episodic.ann_writer",
            str(self.db_path),
            str(self.dim),
            "--min-rows",
            str(self.min_rows),
        ]

    def compact(self) -> None:
        """Fold pending rows and removals into the saved files (and drop rows other processes deleted)."""
        broken, self.broken = self.broken, False
        self.sync(rebuild=broken)

    def compact_soon(self, *, force: bool = False) -> None:
        """Start a background compaction when enough rows wait, or `force`."""
        with self.lock:
            due = force or sum(map(len, self.pending.values())) + self.unfiled >= COMPACT_PENDING
            if not due or not self.ready or (self.worker is not None and self.worker.is_alive()):
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

    def present(self) -> bool:
        """Whether any index file (this layout's, its manifest, or the older one) is beside the store."""
        there = legacy_paths(self.db_path)[0].exists() or manifest_path(self.db_path).exists()
        return there or bool(scope_files(self.db_path))

    def check(self) -> str | None:
        """Whether the files agree with the store, checked in a child process: None when they do, else what is wrong."""
        if legacy_paths(self.db_path)[0].exists():
            return "in the older single-file layout (the next recall rebuilds it, one file per peer)"
        done = subprocess.run(
            [*self._command(), "--check"], capture_output=True, text=True, env=_child_env(), check=False
        )
        if done.returncode < 0:
            return f"reading it ended its reader with signal {signal.Signals(-done.returncode).name}"
        if done.returncode:
            return (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return json.loads(done.stdout).get("problem")

    # --- keeping up with the store ----------------------------------------------------

    def catch_up(self, db: sqlite3.Connection) -> None:
        """Note rows stored (or given a vector) since the last look: pending in scopes with a file, else counted."""
        with self.lock:
            vectors = int(db.execute("SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'vectors'").fetchone()[0])
            last = newest_rowid(db)  # read first:
            columns = "rowid, workspace, peer, agent, embedding"
            rows = db.execute(  # a row committed after it is left to the next look, never skipped
                f"SELECT {columns} FROM episodes WHERE rowid > ? AND rowid <= ? AND {CURRENT}",
                (self.seen_rowid, last),
            ).fetchall()
            if vectors != self.seen_vectors:
                rows += db.execute(
                    f"SELECT {columns} FROM episodes WHERE vector_version > ? AND rowid <= ? AND {CURRENT}",
                    (self.seen_vectors, self.seen_rowid),
                ).fetchall()
                self.seen_vectors = vectors
            self.seen_rowid = max(self.seen_rowid, last)
            for rowid, workspace, peer, agent, blob in rows:
                scope = (workspace, peer, agent)
                if scope not in self.files:
                    self.unfiled += 1
                    continue
                keys, matrix = unpack([(rowid, blob)], self.dim)
                if len(keys):
                    self.pending.setdefault(scope, {})[rowid] = matrix[0]
                    self.pending_scope[rowid] = scope
                    self.removed.discard(rowid)

    def remove(self, rowids: list[int]) -> None:
        """Leave these rows out from now on (deleted or superseded)."""
        with self.lock:
            for rowid in rowids:
                scope = self.pending_scope.pop(rowid, None)
                if scope is not None:
                    self.pending[scope].pop(rowid, None)
                self.removed.add(rowid)

    def scope_index(self, scope: Scope) -> Index | None:
        """The scope's mapped index (None: the scope has no file)."""
        with self.lock:
            return self._map(scope)

    def has(self, scope: Scope) -> bool:
        """Whether the scope has a file (else its recall scores its rows exactly)."""
        return scope in self.files

    def size(self, scope: Scope) -> int:
        """Rows the scope's candidates come from: its file's (fillers left out) and its pending rows."""
        meta = self.files.get(scope)
        held = 0 if meta is None else int(meta["count"]) - int(meta["fillers"])
        return held + len(self.pending.get(scope, ()))

    def candidates(self, vector: np.ndarray, count: int, scope: Scope) -> np.ndarray | None:
        """Up to `count` rowids of the scope nearest the vector (file and pending rows), unverified; None: no file."""
        with self.lock:
            try:
                index = self._map(scope)
            except (OSError, ValueError, RuntimeError) as error:  # set aside: exact search serves, a rebuild follows
                log.warning("episodic: rebuilding the ANN index %s: %s", self.path, error)
                self.files.pop(scope, None)
                self.broken = True
                self.compact_soon(force=True)
                return None
            if index is None:
                return None
            pending, removed = self.pending.get(scope, {}), self.removed
            keys, similarity = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
            if len(index):
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
