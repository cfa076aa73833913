"""The int8 screen: its kernel cannot saturate, its bounds hold, and the top n stays exactly the float32 top n."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from thoth_episodic import int8_screen
from thoth_episodic.vector_cache import SCREEN_MIN_ROWS, VectorCache

DIM = 384


def unit_rows(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    rows = rng.standard_normal((n, dim)).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def test_the_kernel_matches_integer_arithmetic_at_the_extremes():
    rng = np.random.default_rng(0)
    codes = rng.integers(-127, 128, (DIM, 5000)).astype(np.int8)
    codes[:, :3] = 127
    codes[::2, 3:6] = -127
    for query in (np.full(DIM, 126), np.zeros(DIM), rng.integers(1, 127, DIM)):
        got = int8_screen._run(query.astype(np.uint8), codes)
        assert np.array_equal(got, query.astype(np.int64) @ codes.astype(np.int64))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spike=st.floats(0, 50), zero_query=st.booleans())
def test_the_bounds_contain_every_exact_score(seed, spike, zero_query):
    rng = np.random.default_rng(seed)
    rows = unit_rows(rng, 300)
    rows[0] = 0.0  # a row without a vector
    rows[1] = np.eye(DIM, dtype=np.float32)[7]  # all weight on one component
    vector = unit_rows(rng, 1)[0] * (0 if zero_query else 1)
    vector[3] += spike  # queries need not be unit length
    codes, scale, error, norm, total = int8_screen.quantize(rows)
    lower, upper = int8_screen.screen(vector, np.ascontiguousarray(codes.T), scale, error, norm, total)
    exact = rows.astype(np.float64) @ vector.astype(np.float64)
    assert np.all(lower <= exact) and np.all(exact <= upper)
    if spike == 0:  # a spiky query spends its 63 levels on one component: correct, but wider bounds
        assert np.max(upper - lower) < 0.08  # narrow enough to rule out most rows


def filled(rows: np.ndarray) -> VectorCache:
    cache = VectorCache(DIM)
    cache.append([(i + 1, "w\0ann", 0.0, 0.0, None, row.tobytes()) for i, row in enumerate(rows)])
    return cache


@pytest.mark.parametrize("visible_share", [1.0, 0.7])
def test_top_is_exactly_the_float32_top_n_with_near_duplicates(visible_share):
    rng = np.random.default_rng(1)
    centres = unit_rows(rng, 40)
    rows = centres[rng.integers(0, 40, SCREEN_MIN_ROWS + 5000)]
    rows = rows + 0.01 * rng.standard_normal(rows.shape).astype(np.float32)  # many rows nearly tied
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    cache = filled(rows)
    mask = cache.mask("w\0ann", None) & (rng.random(cache.size) < visible_share)
    for vector in [*unit_rows(rng, 10), centres[3], rows[17]]:
        positions, scores = cache.top(vector, mask, 50)
        exact = np.where(mask, rows @ vector, -np.inf)
        expected = np.sort(exact)[::-1][:50]
        assert np.allclose(scores, expected, atol=1e-6)
        assert np.allclose(rows[positions] @ vector, scores, atol=1e-6) and mask[positions].all()


def test_changed_vectors_are_screened_with_their_new_codes():
    rng = np.random.default_rng(2)
    rows = unit_rows(rng, SCREEN_MIN_ROWS + 10)
    cache = filled(rows)
    target = unit_rows(rng, 1)[0]
    cache.set_vectors([(5, target.tobytes())])
    [position], [score] = cache.top(target, cache.mask("w\0ann", None), 1)
    assert cache.rowids[position] == 5 and score == pytest.approx(1.0, abs=1e-5)
