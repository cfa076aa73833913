"""What `GET /v1/metrics` reports: counts, latency medians and p95, and time-stamped samples for plots."""

from __future__ import annotations

import statistics
import time
from collections import Counter, deque
from typing import Any

KEEP = 1000  # latencies kept per kind
SAMPLES = 720  # samples kept for the inspector's plots


class Metrics:
    """Counters and recent latencies of one service process."""

    def __init__(self) -> None:
        self.started = time.time()
        self.counts: Counter[str] = Counter()
        self.latencies: dict[str, deque[float]] = {}
        self.samples: deque[dict[str, Any]] = deque(maxlen=SAMPLES)

    def observe(self, kind: str, seconds: float) -> None:
        """One `recall`, `context`, `turn_first_byte`, `turn`, ... that took `seconds`."""
        self.counts[kind] += 1
        self.latencies.setdefault(kind, deque(maxlen=KEEP)).append(seconds * 1000)
        self.samples.append({"at": time.time(), "kind": kind, "ms": round(seconds * 1000, 2)})

    def count(self, kind: str) -> None:
        """Count an event that has no latency (`remember`, `forget`, ...)."""
        self.counts[kind] += 1

    def report(self) -> dict[str, Any]:
        """Counts, per-kind latency median and p95 (ms), uptime and the recent samples."""
        latency = {
            kind: {"n": len(values), "median_ms": round(statistics.median(values), 2), "p95_ms": round(p95(values), 2)}
            for kind, values in self.latencies.items()
            if values
        }
        return {
            "uptime_s": round(time.time() - self.started, 1),
            "counts": dict(self.counts),
            "latency": latency,
            "samples": list(self.samples),
        }


def p95(values: Any) -> float:
    """The 95th percentile (nearest rank) of some numbers."""
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, max(0, round(0.95 * len(ordered)) - 1))])


__all__ = ["Metrics", "p95"]
