"""The SQLite backend's in-memory copy of every row's embedding, for exact brute-force dense search.

The embeddings are kept as one float32 (capacity, dim) matrix and as the columns of an int8
(dim, capacity) matrix for the screen in `int8_screen`, which `top` uses on big scopes (the
screen's kernel reads codes column-wise; rescoring its few candidates gathers whole float32
rows). Beside them are the columns the visibility filter needs: scope code,
occurred/recorded/superseded times and whether the row has a vector. Rows are appended in
rowid order, so `rowids` stays sorted.
With an ANN index in use (`ann_index`) this cache is only loaded for as-of queries.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import int8_screen

INF = float("inf")
SCREEN_MIN_ROWS = 20_000  # below this, the float32 product alone is faster than screening first


PER_ROW = (  # arrays with one entry per row, besides `vectors` and `codes`
    ("unit", np.float32),  # of the int8 codes (see int8_screen)
    ("error", np.float32),
    ("norm", np.float32),
    ("offset", np.int32),
    ("rowids", np.int64),
    ("scopes", np.int32),
    ("occurred", np.float64),
    ("recorded", np.float64),
    ("superseded", np.float64),
    ("has_vector", np.bool_),
)


class VectorCache:
    """Every row's embedding as float32 and as int8 codes, plus the columns the filters need."""

    vectors: np.ndarray
    codes: np.ndarray
    unit: np.ndarray
    error: np.ndarray
    norm: np.ndarray
    offset: np.ndarray
    rowids: np.ndarray
    scopes: np.ndarray
    occurred: np.ndarray
    recorded: np.ndarray
    superseded: np.ndarray
    has_vector: np.ndarray

    def __init__(self, dim: int, *, capacity: int = 1024) -> None:
        self.dim = dim
        self.generation = -1
        self.vectors_version = 0
        self.last_rowid = 0
        self.size = 0
        self.scope_codes: dict[str, int] = {}
        self._grow(capacity, exactly=True)

    def _grow(self, need: int, *, exactly: bool = False) -> None:
        """Make room for `need` rows, keeping the first `size`.

        Capacity grows by a quarter: the screen's kernel reads every column of `codes`, so
        unused capacity costs time on every search (the store sizes a new cache exactly).
        """
        capacity = len(getattr(self, "rowids", ()))
        if need <= capacity and capacity:
            return
        capacity = need if exactly else max(need, capacity + capacity // 4, 1024)
        vectors = np.zeros((capacity, self.dim), dtype=np.float32)
        codes = np.zeros((self.dim, capacity), dtype=np.int8)
        if self.size:
            vectors[: self.size], codes[:, : self.size] = self.vectors[: self.size], self.codes[:, : self.size]
        self.vectors, self.codes = vectors, codes
        for name, dtype in PER_ROW:
            new = np.zeros(capacity, dtype=dtype)
            if self.size:
                new[: self.size] = getattr(self, name)[: self.size]
            setattr(self, name, new)

    def _unpack(self, blobs: list[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
        """(which blobs are vectors of this dim, their (n, dim) rows with zeros for the others)."""
        valid = np.array([b is not None and len(b) == 4 * self.dim for b in blobs], dtype=bool)
        zero = bytes(4 * self.dim)
        joined = b"".join(b if ok and b is not None else zero for b, ok in zip(blobs, valid, strict=True))
        return valid, np.frombuffer(joined, dtype=np.float32).reshape(len(blobs), self.dim)

    def append(self, rows: list[tuple[Any, ...]]) -> None:
        """Add rows of (rowid, scope, occurred, recorded, superseded, embedding)."""
        if not rows:
            return
        start, end = self.size, self.size + len(rows)
        self._grow(end)
        rowids, scopes, occurred, recorded, superseded, blobs = zip(*rows, strict=True)
        self.rowids[start:end] = rowids
        self.scopes[start:end] = [self.scope_codes.setdefault(s, len(self.scope_codes)) for s in scopes]
        self.occurred[start:end], self.recorded[start:end] = occurred, recorded
        self.superseded[start:end] = [INF if s is None else s for s in superseded]
        self.has_vector[start:end], self.vectors[start:end] = self._unpack(list(blobs))
        self._quantize(np.arange(start, end))
        self.size = end
        self.last_rowid = max(self.last_rowid, int(self.rowids[end - 1]))

    def set_vectors(self, rows: list[tuple[int, bytes | None]]) -> None:
        """Replace the embeddings of known rows, given as (rowid, embedding)."""
        if not rows:
            return
        rowids = np.array([r[0] for r in rows], dtype=np.int64)
        positions = np.searchsorted(self.rowids[: self.size], rowids)
        known = (positions < self.size) & (self.rowids[np.minimum(positions, max(self.size - 1, 0))] == rowids)
        valid, vectors = self._unpack([r[1] for r in rows])
        changed = positions[known]
        self.has_vector[changed] = valid[known]
        self.vectors[changed] = vectors[known]
        self._quantize(changed)

    def _quantize(self, positions: np.ndarray) -> None:
        codes, self.unit[positions], self.error[positions], self.norm[positions], self.offset[positions] = (
            int8_screen.quantize(self.vectors[positions])
        )
        self.codes[:, positions] = codes.T

    def top(self, vector: np.ndarray, mask: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, float32 scores) of the n visible rows nearest the vector, best first; exact."""
        size, visible = len(mask), int(np.count_nonzero(mask))
        if not visible:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        if visible >= SCREEN_MIN_ROWS and 2 * visible >= size:
            lower, upper = int8_screen.screen(
                vector, self.codes, self.unit[:size], self.error[:size], self.norm[:size], self.offset[:size]
            )
            lower[~mask] = -INF
            n = min(n, visible)
            threshold = np.partition(lower, size - n)[size - n]  # the n-th best lower bound
            positions = np.flatnonzero(mask & (upper >= threshold))
            scores = self.vectors[positions] @ vector
        else:
            positions = np.flatnonzero(mask)
            # a small scope gathers its rows; a big one is cheaper scored whole (a gather copies)
            small = 8 * len(positions) < size
            scores = self.vectors[positions] @ vector if small else (self.vectors[:size] @ vector)[positions]
        n = min(n, len(positions))
        best = np.argpartition(scores, len(scores) - n)[-n:]
        best = best[np.argsort(-scores[best])]
        return positions[best], scores[best]

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
