"""The core's own latency per turn, and `thoth --help` cold start; prints JSON.

Per turn: a runtime with N trivial plugins (each returns one small block from
`pre_spawn_context` and does nothing in `post_turn_write`), all sync or all async, and the
`replay` model answering at once, so every millisecond measured is the core's: hook dispatch,
thread hops, assembly, model dispatch, scheduling the background writes (`turn_ms`, the
figure with the target: median under 2 ms); `post_turn_write_ms` is the background dispatch
that follows the reply. Cold start: `thoth --help` as a subprocess (all installed plugins, then none).
Target: median under 0.5 s.

    .venv/bin/python bench/overhead.py [--plugins 10] [--turns 500] [--starts 10]
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

from thoth_core import ContextBlock, hookimpl
from thoth_core.budget import assemble
from thoth_core.config import Config
from thoth_core.runtime import Runtime
from thoth_core.types import Turn

TURN_TARGET_MS = 2.0
COLD_START_TARGET_S = 0.5


class SyncPlugin:
    """Plain hook implementations: the core runs them in worker threads."""

    def __init__(self, index: int) -> None:
        self.block = ContextBlock(tag=f"noop-{index}", text=f"Trivial context number {index}.", layer="episodic")

    @hookimpl
    def pre_spawn_context(self, turn):
        return self.block

    @hookimpl
    def post_turn_write(self, turn, reply):
        return None


class AsyncPlugin(SyncPlugin):
    """`async def` implementations: the core awaits them on the event loop."""

    @hookimpl
    async def pre_spawn_context(self, turn):
        return self.block

    @hookimpl
    async def post_turn_write(self, turn, reply):
        return None


def stats_ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": round(statistics.median(ordered) * 1000, 3),
        "p95": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 3),
    }


def make_runtime(home: Path, plugin_class: type[SyncPlugin], count: int) -> Runtime:
    config = Config(
        data={"thoth": {"model": "replay"}, "models": {"replay": {"rules": [{"reply": "Fine, thanks for asking."}]}}}
    )
    runtime = Runtime(config, autoload=False, home=home)
    for index in range(count):
        runtime.register(plugin_class(index), name=f"noop-{index}")
    return runtime


async def measure_turns(runtime: Runtime, turns: int) -> dict[str, dict[str, float]]:
    """Time the pre-spawn stage, whole turns (reply returned), then draining the background writes."""
    session = await runtime.session(peer="bench", thread="t")
    pre_spawn, whole, background = [], [], []
    for i in range(turns + 20):
        turn = Turn(f"message {i}", "bench", "t")
        started = time.perf_counter()
        await runtime.context(turn, session)
        spent = time.perf_counter() - started
        started = time.perf_counter()
        await runtime.turn(f"message {i}", peer="bench", thread="t")
        whole_spent = time.perf_counter() - started
        started = time.perf_counter()
        await runtime.drain()
        background_spent = time.perf_counter() - started
        session.history.clear()  # keep every turn the same size
        if i >= 20:  # warm-up: first thread starts, imports, caches
            pre_spawn.append(spent)
            whole.append(whole_spent)
            background.append(background_spent)
    await runtime.aclose()
    return {"pre_spawn_ms": stats_ms(pre_spawn), "turn_ms": stats_ms(whole), "post_turn_write_ms": stats_ms(background)}


def measure_assembly(count: int, turns: int) -> dict[str, float]:
    blocks = [SyncPlugin(i).block for i in range(count)]
    samples = []
    for _ in range(turns):
        started = time.perf_counter()
        assemble(blocks, total=6000, layers={"episodic": 1200})
        samples.append(time.perf_counter() - started)
    return stats_ms(samples)


def measure_cold_start(runs: int, **env: str) -> dict[str, float]:
    """Median wall time of `thoth --help` as a fresh process."""
    script = Path(sys.executable).with_name("thoth")
    environ = {**os.environ, **env}
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([str(script), "--help"], env=environ, capture_output=True, check=True)
        samples.append(time.perf_counter() - started)
    return {"median": round(statistics.median(samples), 3), "max": round(max(samples), 3)}


def measure_python_start(runs: int) -> dict[str, float]:
    """The floor under any cold start: this interpreter doing nothing."""
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        samples.append(time.perf_counter() - started)
    return {"median": round(statistics.median(samples), 3)}


PLUGIN_IMPORT = """
import importlib, time
import thoth_core, thoth_core.cli, thoth_core.plugins
started = time.perf_counter()
importlib.import_module({module!r})
print(time.perf_counter() - started)
"""


def measure_plugin_imports() -> dict[str, float]:
    """Milliseconds each installed plugin's module adds to a cold start (beyond the core's imports)."""
    from importlib.metadata import entry_points

    found = {}
    for point in sorted(entry_points(group="thoth"), key=lambda p: p.name):
        result = subprocess.run(
            [sys.executable, "-c", PLUGIN_IMPORT.format(module=point.value.split(":")[0])],
            capture_output=True,
            text=True,
        )
        found[point.name] = round(float(result.stdout) * 1000, 1) if result.returncode == 0 else float("nan")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plugins", type=int, default=10, help="trivial plugins per runtime")
    parser.add_argument("--turns", type=int, default=500, help="timed turns per variant")
    parser.add_argument("--starts", type=int, default=10, help="cold starts of `thoth --help`")
    args = parser.parse_args()

    report: dict[str, object] = {"plugins": args.plugins, "turns": args.turns, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as home:
        for label, plugin_class in (("sync", SyncPlugin), ("async", AsyncPlugin)):
            runtime = make_runtime(Path(home) / label, plugin_class, args.plugins)
            report[label] = asyncio.run(measure_turns(runtime, args.turns))
    report["assembly_ms"] = measure_assembly(args.plugins, args.turns)
    worst = max(report[label]["turn_ms"]["median"] for label in ("sync", "async"))  # type: ignore[index]
    report["turn_target_ms"] = TURN_TARGET_MS
    report["turn_target_met"] = worst < TURN_TARGET_MS
    with tempfile.TemporaryDirectory() as cwd:
        os.chdir(cwd)  # no project thoth.toml
        report["help_cold_start_s"] = measure_cold_start(args.starts)
        report["help_cold_start_no_plugins_s"] = measure_cold_start(args.starts, THOTH_LOAD_PLUGINS="")
        report["python_start_s"] = measure_python_start(args.starts)
        report["plugin_import_ms"] = measure_plugin_imports()
    report["cold_start_target_s"] = COLD_START_TARGET_S
    report["cold_start_target_met"] = report["help_cold_start_s"]["median"] < COLD_START_TARGET_S  # type: ignore[index]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
