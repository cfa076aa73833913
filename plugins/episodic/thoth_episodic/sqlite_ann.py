"""The SQLite store's use of the ANN index: when it is ready, building it, erasing from it, dense search through it."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from . import ann_search
from .ann_files import discard_files, every_file
from .ann_index import AnnIndex
from .ann_search import allowed_exact, ann_dense
from .records import Query
from .scoring import candidate_count
from .sqlite_schema import newest_rowid

log = logging.getLogger(__name__)


class IndexedSearch:
    """Mixed into `SQLiteStore`: the parts of dense search that go through `AnnIndex`."""

    path: Path
    dim: int
    ann: str
    ann_min_rows: int
    _db: sqlite3.Connection
    _lock: Any
    _index: AnnIndex | None
    _index_ready: bool
    _building: threading.Thread | None
    _stop_building: threading.Event

    def _indexed_dense(self, query: Query, allowed: np.ndarray | None) -> list[tuple[int, float, float]]:
        """Dense candidates through the ANN index, verified and rescored from SQLite (no vector cache)."""
        if query.vector is None or self._index is None:
            return []
        vector, n = np.asarray(query.vector, dtype=np.float32), candidate_count(query.k)
        with self._lock:
            if allowed is not None:
                return allowed_exact(self._db, query, allowed, vector, self.dim, n)
            found = ann_dense(self._db, self._index, query, vector, n)
        self._index.compact_soon()
        return found

    def _usable_index(self) -> AnnIndex | None:
        """The index when ready; else builds it (`usearch`) or from `ann_min_rows` starts a background build."""
        if self._index is None or self._index_ready:
            return self._index
        if self.ann == "usearch":
            try:
                self.index_now()
            except Exception:  # noqa: BLE001 - the index is a cache: exact search serves this process instead
                log.exception("episodic: could not build the ANN index %s; searching exactly", f"{self.path}.usearch")
                self._index = None
            return self._index
        if self.index_due():  # one try per process; a failure is logged
            self._building = threading.Thread(target=self._build_logged, daemon=True, name="episodic-ann-build")
            self._building.start()
        return None

    def index_due(self) -> bool:
        """Whether the ANN index is missing and wanted (a store past `ann_min_rows`, or `ann = "usearch"`)."""
        if self._index is None or self._index_ready or self._building is not None:
            return False
        with self._lock:
            return self.ann == "usearch" or newest_rowid(self._db) >= self.ann_min_rows

    def index_now(self, progress: Callable[[int], None] | None = None) -> None:
        """Build the ANN index here and now (an import does: short commands would each start one and abandon it)."""
        assert self._index is not None
        self._index_ready = self._index.build(progress=progress)

    def _build_logged(self) -> None:
        try:
            assert self._index is not None
            self._index_ready = self._index.build(self._stop_building)
        except Exception:  # a failure to persist is never silent
            log.exception("episodic: could not build the ANN index %s", f"{self.path}.usearch")

    def _erase_from_index(self, rows: list[tuple[int, str, str, str]], deleted: int) -> None:
        """After a delete, before it returns: the rows leave the index files, or the touched scopes' files go.

        `rows` are (rowid, workspace, peer, agent), `deleted` the delete's generation. A scope left without
        rows loses its file; a scope that keeps some has its file rewritten (in the writer child).
        """
        building = self._building
        if building is not None and building.is_alive():  # it read the rows before the delete: stop it
            self._stop_building.set()
            building.join()
            self._building, self._stop_building = None, threading.Event()
        scopes = sorted({(w, p, a) for _, w, p, a in rows})
        if self._index is not None:
            self._index.remove([r[0] for r in rows])
            self._index.note(deleted, set(scopes))
            if self._index_ready:
                try:
                    self._index.sync(erase=True)
                    return
                except Exception as error:  # noqa: BLE001 - the files go instead: forget must not leave the vectors
                    log.warning("episodic: could not rewrite the ANN index of %s (%s); deleting it", self.path, error)
                    self._index_ready, self._index.ready = False, False
        discard_files(self.path, scopes)  # not in use here (`exact`, or set aside): delete them rather than rewrite

    def index_checks(self) -> list[tuple[bool, str]]:
        """`thoth doctor` lines about the ANN index files (none when there are none): readable, agree with the store."""
        index = self._index or AnnIndex(self.path, self.dim, expansion=1, min_rows=self.ann_scope_rows())
        if not index.present():
            return []
        if self._index is None:  # `exact`: no process of this home reads or updates them, so they are not judged
            return [(True, f'episodic: ANN index {index.path}: unused (ann = "exact"); {unused_files_hint(self.path)}')]
        problem = index.check()
        return [(problem is None, f"episodic: ANN index {index.path}: {problem or 'agrees with the store'}")]

    def ann_scope_rows(self) -> int:
        """Rows from which a scope gets its own index file: every scope with `ann = "usearch"`, else `SMALL_SCOPE`."""
        return 1 if self.ann == "usearch" else max(1, ann_search.SMALL_SCOPE)


def unused_files_hint(db_path: Path) -> str:
    """How big a store's unused index files are, and what to do with them."""
    files = every_file(db_path)
    size = sum(path.stat().st_size for path in files if path.exists())
    return (
        f"{len(files)} files, {size / 1e6:.1f} MB: delete {db_path.name}.usearch* to free them, or set ann back "
        "(the next save brings them up to the store)"
    )
