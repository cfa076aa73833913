"""Latency of a turn through the `anthropic` provider against the local fake Messages API; prints JSON.

In process: a runtime with no context plugins and the real SDK streaming from the fake on
127.0.0.1, so what is measured is the core plus the SDK plus loopback HTTP: time to the first
text delta and to the whole reply, median and p95. Cold: `thoth ask` as a subprocess (no
plugins), time to its first byte on stdout and to exit, which includes importing the SDK;
and the bare `import anthropic` time for comparison.

    .venv/bin/python bench/anthropic_turn.py [--turns 200] [--asks 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from thoth_core.config import Config
from thoth_core.runtime import Runtime
from thoth_core.testing.fake_anthropic import FakeAnthropic

REPLY = "The quick brown fox jumps over the lazy dog, twice over, for the benchmark."


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and p95 in milliseconds."""
    ordered = sorted(seconds)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
    }


async def in_process(fake: FakeAnthropic, turns: int, home: Path) -> dict[str, dict[str, float]]:
    models = {"anthropic": {"base_url": fake.url, "api_key": "bench", "max_retries": 0}}
    runtime = Runtime(Config(data={"thoth": {"model": "anthropic"}, "models": models}), autoload=False, home=home)
    first: list[float] = []
    whole: list[float] = []
    for i in range(turns + 5):
        started = time.perf_counter()
        seen: list[float] = []
        await runtime.turn(
            f"turn {i}",
            peer="bench",
            thread=f"t{i}",
            on_delta=lambda _d: seen.append(time.perf_counter()) if not seen else None,
        )
        if i >= 5:  # warm-up: first connection, SDK import
            first.append(seen[0] - started)
            whole.append(time.perf_counter() - started)
    await runtime.aclose()
    return {"first_delta": summary(first), "whole_turn": summary(whole)}


def cold_ask(fake: FakeAnthropic, runs: int, home: Path) -> dict[str, dict[str, float]]:
    script = Path(sys.executable).with_name("thoth")
    env = dict(
        os.environ, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="bench", THOTH_HOME=str(home), THOTH_LOAD_PLUGINS=""
    )
    first: list[float] = []
    whole: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        process = subprocess.Popen([str(script), "ask", "hello"], stdout=subprocess.PIPE, env=env, cwd=home)
        assert process.stdout is not None
        process.stdout.read(1)
        first.append(time.perf_counter() - started)
        process.wait(timeout=60)
        whole.append(time.perf_counter() - started)
    return {"first_byte": summary(first), "exit": summary(whole)}


def sdk_import(runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import anthropic"], check=True)
        times.append(time.perf_counter() - started)
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--asks", type=int, default=5)
    args = parser.parse_args()
    fake = FakeAnthropic(replies=[REPLY]).start()
    try:
        with tempfile.TemporaryDirectory() as home:
            result = {
                "in_process": asyncio.run(in_process(fake, args.turns, Path(home))),
                "cold_thoth_ask": cold_ask(fake, args.asks, Path(home)),
                "python_import_anthropic": sdk_import(args.asks),
                "turns": args.turns,
                "asks": args.asks,
                "cpus": os.cpu_count(),
            }
    finally:
        fake.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
