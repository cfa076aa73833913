"""Reflection benchmark: redaction throughput, one session-end run, one nightly run (JSON).

Usage: python bench/reflection.py [--runs 20] [--days 30] [--sessions 20]. The model is the
replay provider, so the figures are reflection's own overhead, not a model's latency.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import string
import tempfile
import time
from pathlib import Path

from thoth_reflection import plugin as reflection
from thoth_reflection.memory import MemoryFile
from thoth_reflection.nightly import run_nightly
from thoth_reflection.settings import state

from thoth_core import count_tokens
from thoth_core.redact import redact
from thoth_core.testing import make_test_runtime

RESULT = {
    "what_worked": ["Asking first."],
    "what_didnt": ["Too long."],
    "skill": None,
    "memory_notes": ["Ann deploys on Fridays.", "The DB is Postgres 16."],
    "persona_observations": ["Be brief."],
    "next_check_at": None,
    "user_model_updates": {"ann": ["Prefers terse answers."]},
}


def text_10kb(rng: random.Random) -> str:
    words = [f"word{rng.randint(0, 999)}" for _ in range(1200)]
    for i in range(0, 1200, 100):
        words[i] = "ghp_" + "".join(rng.choice(string.ascii_letters) for _ in range(36))
    return " ".join(words)[:10_000]


def bench_redaction(n: int) -> dict[str, float]:
    text = text_10kb(random.Random(1))
    times = []
    for _ in range(n):
        started = time.perf_counter()
        redact(text)
        times.append(time.perf_counter() - started)
    median = statistics.median(times)
    return {"redact_10kb_median_ms": round(median * 1000, 3), "redact_mb_per_s": round(len(text) / median / 1e6, 2)}


async def bench_session_end(home: Path, runs: int) -> dict[str, float]:
    runtime = make_test_runtime(
        home / "a",
        {"reflection": reflection},
        replies=[{"purpose": "reflection", "reply": json.dumps(RESULT)}, {"reply": "ok"}],
    )
    times = []
    for i in range(runs):
        for k in range(10):
            await runtime.turn(f"message {k} about deploys", peer="ann", thread=f"t{i}")
        session = await runtime.session(peer="ann", thread=f"t{i}")
        started = time.perf_counter()
        await runtime.end_session(session, "done")
        await runtime.drain()
        times.append(time.perf_counter() - started)
    await runtime.aclose()
    return {"session_end_reflection_median_ms": round(statistics.median(times) * 1000, 2), "session_end_runs": runs}


async def bench_nightly(home: Path, days: int, sessions: int) -> dict[str, float]:
    budget = 600
    runtime = make_test_runtime(
        home / "b", {"reflection": reflection}, config={"plugins": {"reflection": {"snapshot_tokens": budget}}}
    )
    st = state(runtime)
    memory = MemoryFile(st.path(st.settings.memory_file))
    day0 = 1_772_400_000.0
    times, worst = [], 0
    for day in range(days):
        now = day0 + day * 86400
        date = time.strftime("%Y-%m-%d", time.gmtime(now - 3600))
        folder = Path(runtime.home) / "working" / "transcripts" / date
        folder.mkdir(parents=True, exist_ok=True)
        for s in range(sessions):
            rows = [
                {
                    "type": "turn",
                    "at": now - 3600,
                    "peer": "ann",
                    "user": f"Day {day} session {s}: we talked about item {s} at length.",
                    "assistant": "ok",
                },
                {"type": "session_end", "at": now - 3500},
            ]
            (folder / f"d{day}s{s}.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
        memory.append_notes([f"Day {day} note {k}" for k in range(5)], day=date)
        started = time.perf_counter()
        await run_nightly(runtime, now=now)
        times.append(time.perf_counter() - started)
        worst = max(worst, count_tokens(memory.section("snapshot")))
    await runtime.aclose()
    return {
        "nightly_median_ms": round(statistics.median(times) * 1000, 2),
        "nightly_days": days,
        "sessions_per_day": sessions,
        "snapshot_max_tokens": worst,
        "snapshot_budget": budget,
        "snapshot_max_over_budget": round(worst / budget, 3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    logging.getLogger("thoth_reflection").setLevel(
        logging.ERROR
    )  # the replay model has no snapshot script: extractive fallback
    with tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        os.environ["THOTH_HOME"] = tmp
        out = {"bench": "reflection", **bench_redaction(200)}
        out.update(await bench_session_end(Path(tmp), args.runs))
        out.update(await bench_nightly(Path(tmp), args.days, args.sessions))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
