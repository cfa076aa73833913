"""The overhead of a memory tool call in the turn, in process, through the `anthropic` provider; prints JSON.

A runtime with the real layers (working, identity, episodic) and the real SDK against the fake
Messages API on 127.0.0.1. Each measured turn is one of three, interleaved so that drift hits
each alike: the model answers at once (`plain`); it calls the `recall` memory tool `--calls`
times, then answers (`recall`); it calls a tool that does nothing as often (`noop`). Per call:
(turn - plain turn) / calls, median over turns. `noop` is the loop itself (the core's wrapper,
one more request and its stream through the SDK and loopback HTTP); `recall` adds the recall
over every layer. `tool_ms` is the median time inside the handler, from the turn's report.

    .venv/bin/python bench/tool_loop.py [--turns 40] [--calls 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from thoth_episodic import plugin as episodic
from thoth_identity import plugin as identity
from thoth_working import plugin as working

from thoth_core import hookimpl
from thoth_core.testing import make_test_runtime
from thoth_core.testing.fake_anthropic import FakeAnthropic

NOOP = {"name": "noop", "description": "Do nothing.", "input_schema": {"type": "object", "properties": {}}}


class Noop:
    """A plugin offering a tool that does nothing: the tool loop's own cost."""

    @hookimpl
    def turn_tools(self, turn: Any, session: Any) -> list[dict[str, Any]]:
        return [dict(NOOP, handler=lambda _input: "ok")]


class Script:
    """Per turn: `calls` calls of `tool` (none for plain), then the answer."""

    def __init__(self) -> None:
        self.tool, self.calls, self.made = "", 0, 0

    def start(self, tool: str, calls: int) -> None:
        self.tool, self.calls, self.made = tool, calls, 0

    def __call__(self, body: dict[str, Any]) -> Any:
        if (body.get("tool_choice") or {}).get("type") == "tool":  # /remember reading facts
            return "no facts"
        if self.tool and self.made < self.calls:
            self.made += 1
            tool_input = {"query": "which tea do I like"} if self.tool == "recall" else {}
            return {"reply": "", "tool_use": {"name": self.tool, "input": tool_input}}
        return "An answer of a few words."


async def measure(turns: int, calls: int, root: Path) -> dict[str, Any]:
    fake = FakeAnthropic().start()
    script = Script()
    fake.replies = script
    models = {"anthropic": {"base_url": fake.url, "api_key": "bench", "max_retries": 0}}
    config = {
        "thoth": {"model": "anthropic", "tool_calls": calls + 1},
        "models": models,
        "plugins": {"identity": {"derive": False, "remember_timeout": 0}},  # no model calls besides the turn's
    }
    plugins = {"working": working, "identity": identity, "episodic": episodic, "noop": Noop()}
    home = root / "home"
    home.mkdir()
    runtime = make_test_runtime(home, plugins, root=root, config=config)
    for text in ("My favourite tea is genmaicha", "I live in Oslo", "My sister Ann lives in Bergen"):
        await runtime.turn(f"/remember {text}", peer="bench", thread="setup")
    times: dict[str, list[float]] = {"plain": [], "recall": [], "noop": []}
    inside: dict[str, list[float]] = {"recall": [], "noop": []}
    for i in range(turns + 3):
        for kind in ("plain", "recall", "noop"):
            script.start("" if kind == "plain" else kind, calls)
            started = time.perf_counter()
            result = await runtime.turn(f"question {i}", peer="bench", thread=f"t{i}-{kind}")
            elapsed = time.perf_counter() - started
            await runtime.drain()
            if i < 3:  # warm-up: first connection, the embedder, the SDK
                continue
            times[kind].append(elapsed)
            if kind != "plain":
                assert len(result.assembly.tools) == calls, result.assembly.tools
                inside[kind] += [call["ms"] for call in result.assembly.tools]
    await runtime.aclose()
    fake.stop()
    plain = statistics.median(times["plain"])
    report: dict[str, Any] = {"turns": turns, "calls_per_turn": calls, "plain_turn_ms": round(plain * 1000, 2)}
    for kind in ("noop", "recall"):
        per_call = [(t - p) / calls * 1000 for t, p in zip(times[kind], times["plain"], strict=True)]
        report[kind] = {
            "turn_ms": round(statistics.median(times[kind]) * 1000, 2),
            "per_call_ms": round(statistics.median(per_call), 2),
            "tool_ms": round(statistics.median(inside[kind]), 2),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        print(json.dumps(asyncio.run(measure(args.turns, args.calls, Path(folder))), indent=2))


if __name__ == "__main__":
    main()
