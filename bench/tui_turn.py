"""What the TUI adds to a turn: time to the first token on screen and to the whole rendered reply; prints JSON.

Both sides stream a ~120-word Markdown reply from the fake Messages API on 127.0.0.1 through the
real `anthropic` provider. `runtime`: `runtime.turn` alone (first text delta, whole turn).
`tui`: the Textual app headless (`App.run_test`), from submitting the message (`run_text`, what
enter does) to the reply's Markdown widget showing its first block, and to the turn's worker
finishing with the reply rendered and swapped to one static Markdown render. The fake sends all
~150 deltas at once, so `whole_reply_rendered` is the rendering cost of streamed Markdown, not
network time.
`startup`: from starting the app to the prompt being ready with the model built (SDK imported).

    .venv/bin/python bench/tui_turn.py [--turns 30] [--starts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from thoth_tui import plugin as tui_plugin
from thoth_tui.app import ThothApp
from thoth_tui.chat import ChatMessage

from thoth_core.config import Config
from thoth_core.runtime import Runtime
from thoth_core.testing.fake_anthropic import FakeAnthropic

REPLY = "## Notes\n\n" + "\n".join(f"- point {i}: the quick brown fox jumps over the lazy dog" for i in range(12))
POLL = 0.002


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and p95 in milliseconds."""
    ordered = sorted(seconds)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 2),
    }


def make_runtime(fake: FakeAnthropic, home: Path) -> Runtime:
    models = {"anthropic": {"base_url": fake.url, "api_key": "bench", "max_retries": 0}}
    runtime = Runtime(Config(data={"thoth": {"model": "anthropic"}, "models": models}), autoload=False, home=home)
    runtime.register(tui_plugin, name="tui")
    return runtime


async def bare(fake: FakeAnthropic, turns: int, home: Path) -> dict[str, dict[str, float]]:
    runtime = make_runtime(fake, home)
    first, whole = [], []
    for i in range(turns + 3):
        seen: list[float] = []
        started = time.perf_counter()
        await runtime.turn(
            f"turn {i}", peer="bench", thread="bare", on_delta=lambda _d: seen.append(time.perf_counter())
        )
        if i >= 3:  # warm-up: SDK import, first connection
            first.append(seen[0] - started)
            whole.append(time.perf_counter() - started)
    await runtime.aclose()
    return {"first_delta": summary(first), "whole_turn": summary(whole)}


async def until(condition) -> None:  # type: ignore[no-untyped-def]
    while not condition():
        await asyncio.sleep(POLL)


async def tui(fake: FakeAnthropic, turns: int, home: Path) -> dict[str, dict[str, float]]:
    app = ThothApp(make_runtime(fake, home), peer="bench", thread="tui")
    first, whole = [], []
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        for i in range(turns + 3):
            before = len(app.query(ChatMessage))
            started = time.perf_counter()
            await app.run_text(f"turn {i}")  # what pressing enter does (Pilot's press adds its own settling waits)
            await until(lambda: len(app.query(ChatMessage)) >= before + 2)
            reply = list(app.query(ChatMessage))[-1]
            await until(lambda: any(md.children for md in reply.query("Markdown")))  # mounted and rendering
            shown = time.perf_counter()
            await app.workers.wait_for_complete()
            assert reply.text == REPLY and not reply.query("Markdown")  # finished: one static render
            if i >= 3:
                first.append(shown - started)
                whole.append(time.perf_counter() - started)
        await pilot.pause()
    return {"first_token_shown": summary(first), "whole_reply_rendered": summary(whole)}


async def startup(fake: FakeAnthropic, starts: int, home: Path) -> dict[str, float]:
    times = []
    for _ in range(starts):
        started = time.perf_counter()
        app = ThothApp(make_runtime(fake, home), peer="bench", thread="start")
        async with app.run_test(size=(100, 30)):
            await app.workers.wait_for_complete()
            times.append(time.perf_counter() - started)
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--starts", type=int, default=5)
    args = parser.parse_args()
    fake = FakeAnthropic(replies=[REPLY]).start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder)
            runtime_side = asyncio.run(bare(fake, args.turns, home / "bare"))
            tui_side = asyncio.run(tui(fake, args.turns, home / "tui"))
            started = asyncio.run(startup(fake, args.starts, home / "start"))
    finally:
        fake.stop()
    result = {
        "turns": args.turns,
        "runtime": runtime_side,
        "tui": tui_side,
        "startup_ready": started,
        "first_token_overhead_ms": round(
            tui_side["first_token_shown"]["median_ms"] - runtime_side["first_delta"]["median_ms"], 2
        ),
        "whole_reply_ratio": round(
            tui_side["whole_reply_rendered"]["median_ms"] / runtime_side["whole_turn"]["median_ms"], 2
        ),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
