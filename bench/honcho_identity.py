"""Turn latency of the L2 identity layer's Honcho backend against a real Honcho: cold, hung, down, warm.

Uses `../shared/honcho-real` (DIR from `thoth_identity.honcho_real.server_dir`). For each case
a fresh runtime (a new process's state) times the whole pre-spawn stage (`runtime.context`) for
a peer with a hard fact and one earlier exchange, and records the block's kind (`live`, or
`fallback`: hard facts and the last known model, marked stale) and whether it came at all.
- cold: the server restarted just before, first turn of a fresh runtime (3 restarts);
- hung: the API's process group stopped with SIGSTOP (5 turns);
- down: a closed port (5 turns);
- warm: the server answered before (one warm-up request), 10 turns.
Prints JSON: per case the median latency in ms, the block kinds, and blocks missing (target 0).
Run: .venv/bin/python bench/honcho_identity.py
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from thoth_identity import honcho_real, plugin
from thoth_identity.fake_honcho import free_port
from thoth_identity.plugin import layer_for

from thoth_core import Turn
from thoth_core.config import Config
from thoth_core.runtime import Runtime

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = honcho_real.scripts_folder(REPO)
COLD_STARTS, HUNG_TURNS, DOWN_TURNS, WARM_TURNS = 3, 5, 5, 10


def runtime_for(home: Path, url: str, workspace: str) -> Runtime:
    table = {"base_url": url, "workspace": workspace, "write_timeout": 2.0, "write_retries": 0}
    replay = {"replay": {"rules": [{"reply": "ok"}]}}
    data = {"plugins": {"identity": table}, "thoth": {"model": "replay"}, "models": replay}
    runtime = Runtime(Config(data=data), home=home, autoload=False)
    runtime.register(plugin, name="identity")
    return runtime


async def seed(home: Path, url: str, workspace: str) -> None:
    """A peer with a fact, one exchange in Honcho, and a last good answer kept locally."""
    runtime = runtime_for(home, url, workspace)
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
    await runtime.turn("I keep bees in my garden", peer="ann", thread="t")
    await runtime.drain()
    await runtime.aclose()


async def timed_turn(home: Path, url: str, workspace: str, *, fresh: Runtime | None = None) -> tuple[float, str]:
    runtime = fresh or runtime_for(home, url, workspace)
    session = await runtime.session(peer="ann", thread="t")
    started = time.perf_counter()
    assembly = await runtime.context(Turn("How are my bees doing?", "ann", "t", session.workspace), session)
    seconds = time.perf_counter() - started
    blocks = [b for b in assembly.blocks if b.tag == "user-model"]
    kind = layer_for(runtime).last_kind if blocks else "missing"
    if fresh is None:
        await runtime.aclose()
    return seconds * 1000, kind


def summary(samples: list[tuple[float, str]]) -> dict[str, object]:
    kinds = [kind for _, kind in samples]
    return {
        "turns": len(samples),
        "median_ms": round(statistics.median(ms for ms, _ in samples), 1),
        "max_ms": round(max(ms for ms, _ in samples), 1),
        "kinds": {kind: kinds.count(kind) for kind in sorted(set(kinds))},
        "missing": kinds.count("missing"),
    }


async def main() -> dict[str, object]:
    folder = honcho_real.server_dir()
    results: dict[str, object] = {"server_dir": str(folder)}
    with tempfile.TemporaryDirectory() as tmp:
        home, workspace = Path(tmp), f"bench{uuid.uuid4().hex[:8]}"
        url, _ = honcho_real.start(SCRIPTS, folder)
        await seed(home, url, workspace)
        cold = []
        for _ in range(COLD_STARTS):
            honcho_real.stop(SCRIPTS, folder)
            url, _ = honcho_real.start(SCRIPTS, folder)
            cold.append(await timed_turn(home, url, workspace))
        results["cold"] = summary(cold)
        warm_runtime = runtime_for(home, url, workspace)
        await timed_turn(home, url, workspace, fresh=warm_runtime)  # the warm-up request
        warm = [await timed_turn(home, url, workspace, fresh=warm_runtime) for _ in range(WARM_TURNS)]
        results["warm"] = summary(warm)
        await warm_runtime.aclose()
        honcho_real.hang(folder)
        try:
            results["hung"] = summary([await timed_turn(home, url, workspace) for _ in range(HUNG_TURNS)])
        finally:
            honcho_real.resume(folder)
        down = f"http://127.0.0.1:{free_port()}"
        results["down"] = summary([await timed_turn(home, down, workspace) for _ in range(DOWN_TURNS)])
    results["deadline_ms"] = plugin.DEADLINE * 1000
    return results


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main()), indent=2))
