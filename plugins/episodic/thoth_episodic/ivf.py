"""An opt-in approximate index for very large stores: inverted lists over k-means cells.

`[plugins.episodic] ann = "ivf"` makes the SQLite backend build it once the vector cache
holds `ann_min_rows` rows (default 200,000; below that exact search is fast enough).
sqrt(n) centroids are trained by spherical k-means on a sample; every row is assigned to
its nearest centroid and a copy of the matrix is kept sorted by cell, so probing the
`nprobe` best cells (default: a tenth of them) reads contiguous slices. Rows added after the build are searched
exactly until they exceed a quarter of the index, which triggers a rebuild.
`bench/episodic_latency.py` reports its recall against exact search.
"""

from __future__ import annotations

import math

import numpy as np


class IVFIndex:
    """Cells of the first `size` rows of a matrix; see the module docstring."""

    def __init__(self, matrix: np.ndarray, *, seed: int = 0, iterations: int = 6) -> None:
        self.size = len(matrix)
        cells = max(1, int(math.sqrt(self.size)))
        rng = np.random.default_rng(seed)
        sample = matrix[rng.choice(self.size, min(self.size, 32 * cells), replace=False)]
        centroids = sample[rng.choice(len(sample), cells, replace=False)].copy()
        for _ in range(iterations):
            nearest = np.argmax(sample @ centroids.T, axis=1)
            sums = np.zeros_like(centroids)
            np.add.at(sums, nearest, sample)
            empty = ~sums.any(axis=1)
            sums[empty] = centroids[empty]
            centroids = sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
        self.centroids = centroids.astype(np.float32)
        assigned = np.concatenate(
            [np.argmax(matrix[i : i + 16384] @ self.centroids.T, axis=1) for i in range(0, self.size, 16384)]
        )
        self.order = np.argsort(assigned, kind="stable")
        self.offsets = np.searchsorted(assigned[self.order], np.arange(cells + 1))
        self.sorted = np.ascontiguousarray(matrix[self.order])

    def search(self, query: np.ndarray, nprobe: int) -> tuple[np.ndarray, np.ndarray]:
        """(row positions, cosine scores) of every row in the `nprobe` cells nearest the query."""
        cells = len(self.centroids)
        best = np.argpartition(-(self.centroids @ query), min(nprobe, cells) - 1)[: min(nprobe, cells)]
        positions, scores = [], []
        for cell in best:
            start, end = self.offsets[cell], self.offsets[cell + 1]
            if end > start:
                positions.append(self.order[start:end])
                scores.append(self.sorted[start:end] @ query)
        if not positions:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        return np.concatenate(positions), np.concatenate(scores)
