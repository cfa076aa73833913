"""Micro-benchmark of the L4 procedural layer with the shipped persona, skills and notes.

Prints JSON: median milliseconds to load a session's stable context (persona, skills index,
knowledge, reflexion records: done once per session start) and for one turn's
`pre_spawn_context` (cached blocks; plus the reflexion lookup on an error turn).
Run: .venv/bin/python bench/procedural_context.py
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from thoth_procedural import plugin

from thoth_core import Session, Turn
from thoth_core.budget import block_tokens
from thoth_core.testing import make_test_runtime

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 200


def median_ms(fn) -> float:
    """Median milliseconds of fn over ROUNDS calls."""
    samples = []
    for _ in range(ROUNDS):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name in ("persona", "knowledge", "reflexion"):
            shutil.copytree(REPO / name, root / name)
        shutil.copytree(REPO / ".claude" / "skills", root / ".claude" / "skills")
        (root / "home").mkdir()
        runtime = make_test_runtime(root / "home", {"procedural": plugin}, root=root)
        session = Session("default", "ann", "bench", runtime=runtime)
        plugin.session_start(session=session)
        calm = Turn("what should I do next?", "ann", "bench")
        failing = Turn("retry please", "ann", "bench", error="anthropic.InternalServerError: 529 overloaded")
        blocks = plugin.pre_spawn_context(turn=calm, session=session)
        out = {
            "bench": "procedural_context",
            "rounds": ROUNDS,
            "session_start_load_ms": round(median_ms(lambda: plugin.load_context(runtime)), 3),
            "pre_spawn_context_ms": round(median_ms(lambda: plugin.pre_spawn_context(turn=calm, session=session)), 4),
            "pre_spawn_context_error_turn_ms": round(
                median_ms(lambda: plugin.pre_spawn_context(turn=failing, session=session)), 4
            ),
            "stable_blocks": len(blocks),
            "stable_tokens": sum(block_tokens(b) for b in blocks),
            "procedural_budget": runtime.config.layer_budgets.get("procedural"),
        }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
