"""Pre-spawn latency of the L2 identity layer's embedded backend with 10k observations for one peer.

Fills a fresh store (10,000 observations for `ann`, 2,000 for each of four other peers, a few
hard facts), then times the `user-model` block for 300 varied messages: the plugin's
`pre_spawn_context` called directly, and the whole pre-spawn stage through `runtime.context`.
No model is configured, so this is retrieval alone (BM25 over FTS5, facts, budget fitting).
Prints JSON: median and p95 in milliseconds. Target: median under 15 ms.
Run: .venv/bin/python bench/identity_latency.py
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

from thoth_identity import plugin
from thoth_identity.plugin import backend_for

from thoth_core import Turn
from thoth_core.config import Config
from thoth_core.runtime import Runtime

OBSERVATIONS, OTHER_PEERS, OTHER_EACH, QUERIES = 10_000, 4, 2_000, 300
TARGET_MS = 15.0

SUBJECTS = [
    "sailing",
    "bees",
    "garden",
    "python",
    "rust",
    "coffee",
    "running",
    "chess",
    "music",
    "piano",
    "hiking",
    "cooking",
    "deadlines",
    "meetings",
    "travel",
    "trains",
    "books",
    "poetry",
    "databases",
    "kubernetes",
    "family",
    "sister",
    "dog",
    "cycling",
    "photography",
    "statistics",
    "teaching",
    "mythology",
    "design",
    "sleep",
]
VERBS = [
    "enjoys",
    "avoids",
    "talks often about",
    "is learning",
    "gets stressed by",
    "prefers short answers on",
    "asked twice about",
    "has strong opinions on",
    "recently started",
    "used to work on",
]
CONTEXTS = [
    "at work",
    "on weekends",
    "when tired",
    "with friends",
    "in the mornings",
    "during holidays",
    "late at night",
]


def observation(rng: random.Random, name: str) -> str:
    """One synthetic observation sentence."""
    return (
        f"{name} {rng.choice(VERBS)} {rng.choice(SUBJECTS)} {rng.choice(CONTEXTS)} and mentions {rng.choice(SUBJECTS)}"
    )


def message(rng: random.Random) -> str:
    """One synthetic user message."""
    subject, context, other = rng.choice(SUBJECTS), rng.choice(CONTEXTS), rng.choice(SUBJECTS)
    return f"Can you help me plan some {subject} {context}? I also wonder about {other}."


def fill(runtime: Runtime, rng: random.Random) -> None:
    store = backend_for(runtime).store
    peers = [("ann", OBSERVATIONS)] + [(f"peer{i}", OTHER_EACH) for i in range(OTHER_PEERS)]
    with store.transaction():
        for peer, count in peers:
            for i in range(count):
                store.add_observation(
                    "default",
                    peer,
                    f"{observation(rng, peer)} (#{i})",
                    kind="explicit",
                    author="deriver",
                    confidence=rng.random(),
                    source="bench",
                )
    for predicate, value in [("name", "Ann"), ("profession", "nurse"), ("location", "Bergen"), ("sister", "Maria")]:
        store.set_fact("default", "ann", predicate, value, confidence=1.0, source="bench")


def stats(samples: list[float]) -> dict[str, float]:
    samples = sorted(samples)
    return {
        "median": round(statistics.median(samples), 3),
        "p95": round(samples[int(len(samples) * 0.95) - 1], 3),
        "max": round(samples[-1], 3),
    }


async def measure(runtime: Runtime, rng: random.Random) -> dict[str, object]:
    session = await runtime.session(peer="ann", thread="bench")
    texts = [message(rng) for _ in range(QUERIES)]
    await plugin.pre_spawn_context(turn=Turn(texts[0], "ann", "bench"), session=session)  # warm-up
    direct, stage, sizes = [], [], []
    for text in texts:
        turn = Turn(text, "ann", "bench")
        started = time.perf_counter()
        block = await plugin.pre_spawn_context(turn=turn, session=session)
        direct.append((time.perf_counter() - started) * 1000)
        sizes.append(block.text.count("\n- ") if block else 0)
        started = time.perf_counter()
        await runtime.context(turn, session)
        stage.append((time.perf_counter() - started) * 1000)
    return {
        "hook_ms": stats(direct),
        "pre_spawn_stage_ms": stats(stage),
        "mean_lines_in_block": round(statistics.mean(sizes), 1),
    }


async def main() -> None:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as home:
        runtime = Runtime(Config(data={}), autoload=False, home=Path(home))
        runtime.register(plugin, name="identity")
        started = time.perf_counter()
        fill(runtime, rng)
        fill_seconds = time.perf_counter() - started
        result = await measure(runtime, rng)
        await runtime.aclose()
    median = result["hook_ms"]["median"]  # type: ignore[index]
    print(
        json.dumps(
            {
                "bench": "identity_latency",
                "backend": "embedded",
                "observations_for_peer": OBSERVATIONS,
                "observations_total": OBSERVATIONS + OTHER_PEERS * OTHER_EACH,
                "queries": QUERIES,
                "fill_seconds": round(fill_seconds, 2),
                **result,
                "target_median_ms": TARGET_MS,
                "meets_target": median < TARGET_MS,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
