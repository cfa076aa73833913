"""Exact dense top-n, faster: an int8 screen on ONNX Runtime, then float32 scores for the rows it cannot rule out.

Each cached vector x is also kept as int8 codes c = round(x / u), with its own unit
u = max|x_i| / 127, its error e = |x - c u| and the norm |c u|. A query q gets 7-bit codes
q7 = round(q t), |q7| <= 63, offset by 64 into uint8, so ONNX Runtime's u8 x s8 kernel
(`MatMulInteger`, whose AVX2 path adds pairs of products in int16) cannot saturate. One call
scores every row, reading a quarter of the bytes of the float32 product. The approximate
score a = q7.c u / t differs from the exact q.x by at most |q| e + |q - q7/t| |c u|
(Cauchy-Schwarz on q.(x - c u) + (q - q7/t).(c u)); every row whose upper bound reaches the
n-th best lower bound is rescored in float32, so the top n is exactly the float32 top n.
The graph is 122 bytes, built by `scripts/build_screen_model.py`.
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

MODEL = bytes.fromhex(
    "08083a84010a250a0571756572790a05636f646573120673636f726573220d4d61744d756c496e7465676572120b696e74385f73637265"
    "656e5a180a057175657279120f0a0d080212090a0208010a031201645a190a05636f64657312100a0e0803120a0a031201640a0312016e"
    "62190a0673636f726573120f0a0d080612090a0208010a0312016e42040a00100d"
)
QUERY_OFFSET = 64

_session: Any = None
_lock = threading.Lock()


def _run(query: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """int32 scores of uint8 query codes (dim,) against int8 code columns (dim, n)."""
    global _session
    with _lock:
        if _session is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            _session = ort.InferenceSession(MODEL, options, providers=["CPUExecutionProvider"])
    return _session.run(None, {"query": query[None, :], "codes": codes})[0][0]  # type: ignore[no-any-return]


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(codes, unit, error, norm, offset) of float32 rows (n, dim): x ~ codes * unit; a zero row gets zero codes.

    `offset` is what the uint8 query's +64 adds to the row's integer score (64 * sum of codes).
    """
    peak = np.abs(rows).max(axis=1, keepdims=True)
    unit = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(rows / unit), -127, 127).astype(np.int8)
    decoded = codes * unit
    error = np.linalg.norm(rows - decoded, axis=1).astype(np.float32)
    norm = np.linalg.norm(decoded, axis=1).astype(np.float32)
    return codes, unit[:, 0], error, norm, QUERY_OFFSET * codes.sum(axis=1, dtype=np.int32)


def screen(
    vector: np.ndarray,
    codes: np.ndarray,
    unit: np.ndarray,
    error: np.ndarray,
    norm: np.ndarray,
    offset: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds of vector . x for each row, from its int8 codes (a column of `codes`) alone.

    float32 and in place: at 100k rows a float64 temporary costs more than the kernel call.
    """
    vector = np.asarray(vector, dtype=np.float64)  # a float32 norm of a tiny query underflows to 0
    peak = float(np.abs(vector).max())
    step = 63.0 / peak if peak > 1e-30 else 1.0  # a (near) zero query gets zero codes and its norm as error
    query = np.clip(np.rint(vector * step), -63, 63)
    query_error = float(np.linalg.norm(vector - query / step))
    raw = _run((query + QUERY_OFFSET).astype(np.uint8), codes)[: len(unit)]
    raw -= offset
    approximate = raw.astype(np.float32)
    approximate *= unit
    approximate *= np.float32(1.0 / step)
    length = float(np.linalg.norm(vector))
    rounding = len(vector) * 2.0**-23 * length  # float32 dot products are off by at most this times |x|
    bound = error * np.float32(length + rounding)
    bound += np.float32(query_error + rounding) * norm
    lower = approximate - bound
    approximate += bound
    return lower, approximate
