"""The SQLite backend's in-memory copy of every row's embedding, for brute-force dense search.

One float32 matrix (grown by doubling) plus the columns the visibility filter needs: scope
code, occurred/recorded/superseded times and whether the row has a vector. Rows are appended
in rowid order, so `rowids` stays sorted. An optional IVF index over it lives in `index`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .ivf import IVFIndex

INF = float("inf")


class VectorCache:
    """Every row's embedding as one float32 matrix plus the columns the filters need."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.generation = -1
        self.last_rowid = 0
        self.size = 0
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.rowids = np.zeros(0, dtype=np.int64)
        self.scopes = np.zeros(0, dtype=np.int32)
        self.occurred = np.zeros(0)
        self.recorded = np.zeros(0)
        self.superseded = np.zeros(0)
        self.has_vector = np.zeros(0, dtype=bool)
        self.scope_codes: dict[str, int] = {}
        self.index: IVFIndex | None = None

    def _grow(self, need: int) -> None:
        capacity = len(self.rowids)
        if need <= capacity:
            return
        capacity = max(need, capacity * 2, 1024)
        self.matrix = (
            np.resize(self.matrix, (capacity, self.dim))
            if self.size
            else np.zeros((capacity, self.dim), dtype=np.float32)
        )
        for name, dtype in (
            ("rowids", np.int64),
            ("scopes", np.int32),
            ("occurred", float),
            ("recorded", float),
            ("superseded", float),
            ("has_vector", bool),
        ):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=dtype)
            new[: self.size] = old[: self.size]
            setattr(self, name, new)

    def append(self, rows: list[tuple[Any, ...]]) -> None:
        """Add rows of (rowid, scope, occurred, recorded, superseded, embedding)."""
        self._grow(self.size + len(rows))
        for rowid, scope, occurred, recorded, superseded, blob in rows:
            i = self.size
            self.rowids[i] = rowid
            self.scopes[i] = self.scope_codes.setdefault(scope, len(self.scope_codes))
            self.occurred[i], self.recorded[i] = occurred, recorded
            self.superseded[i] = INF if superseded is None else superseded
            self.has_vector[i] = blob is not None and len(blob) == 4 * self.dim
            self.matrix[i] = np.frombuffer(blob, dtype=np.float32) if self.has_vector[i] else 0.0
            self.size += 1
            self.last_rowid = max(self.last_rowid, rowid)

    def mask(self, scope: str, as_of: float | None) -> np.ndarray:
        """Which rows are visible for a scope (current, or as of a moment)."""
        n = self.size
        code = self.scope_codes.get(scope)
        if code is None:
            return np.zeros(n, dtype=bool)
        visible = (self.scopes[:n] == code) & self.has_vector[:n]
        if as_of is None:
            return visible & (self.superseded[:n] == INF)
        return visible & (self.recorded[:n] <= as_of) & (self.superseded[:n] > as_of) & (self.occurred[:n] <= as_of)
