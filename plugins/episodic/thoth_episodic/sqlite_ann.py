"""The SQLite store's use of the ANN index: when it is ready, building it, and dense search through it."""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

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
        self._index.compact_soon(self._reader)
        return found

    def _reader(self) -> sqlite3.Connection:
        """A separate connection for background index work."""
        return sqlite3.connect(self.path, timeout=30.0)

    def _usable_index(self) -> AnnIndex | None:
        """The index when ready; else builds it (`usearch`) or from `ann_min_rows` starts a background build."""
        if self._index is None or self._index_ready:
            return self._index
        if self.ann == "usearch":
            self.index_now()
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
        self._index.build(self._reader, progress=progress)
        self._index_ready = True

    def _build_logged(self) -> None:
        try:
            assert self._index is not None
            self._index.build(self._reader, self._stop_building)
            self._index_ready = not self._stop_building.is_set()
        except Exception:  # a failure to persist is never silent
            log.exception("episodic: could not build the ANN index %s", f"{self.path}.usearch")
