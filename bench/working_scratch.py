"""Micro-benchmark of the L1 working layer: scratch set/get/list/clear and a transcript flush.

Prints JSON: median microseconds per operation over several rounds. Target: scratch ops sub-ms.
Run: .venv/bin/python bench/working_scratch.py
"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from pathlib import Path

from thoth_working import SessionStore, scratch

from thoth_core import Session

ROUNDS, OPS = 15, 2000


def per_op(fn, ops: int = OPS) -> float:
    """Median microseconds per call of fn over ROUNDS rounds of ops calls."""
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        for i in range(ops):
            fn(i)
        samples.append((time.perf_counter() - started) / ops * 1e6)
    return statistics.median(samples)


def main() -> None:
    session = Session("default", "ann", "bench")
    pad = scratch(session)
    for i in range(200):
        pad.set(f"plugin{i % 5}.key{i}", {"value": i})
    results = {
        "scratch_set_us": per_op(lambda i: pad.set(f"bench.k{i % 100}", i)),
        "scratch_get_us": per_op(lambda i: pad.get(f"bench.k{i % 100}")),
        "scratch_list_prefix_us_300_keys": per_op(lambda i: pad.list("plugin3."), ops=200),
        "scratch_clear_prefix_us": per_op(
            lambda i: (pad.set("tmp.a", 1), pad.set("tmp.b", 2), pad.clear("tmp.")), ops=500
        ),
    }
    with tempfile.TemporaryDirectory() as home:
        store = SessionStore(Path(home))
        turn = {
            "type": "turn",
            "turn_id": "t",
            "user": "a question of ordinary length",
            "assistant": "an answer " * 30,
            "model": "replay",
        }

        def flush(i: int) -> None:
            session.transcript.append(dict(turn, at=time.time()))
            store.flush(session)

        results["transcript_flush_one_turn_us"] = per_op(flush, ops=100)
        store.close()
    results["sub_ms"] = all(v < 1000 for k, v in results.items() if k.startswith("scratch_"))
    print(
        json.dumps(
            {
                "bench": "working_scratch",
                "rounds": ROUNDS,
                **{k: round(v, 3) if isinstance(v, float) else v for k, v in results.items()},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
