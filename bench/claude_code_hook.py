"""Latency the Claude Code UserPromptSubmit hook adds to a prompt, in process and as a process; prints JSON.

An agent home made by `thoth init` in a temporary folder, with every installed plugin, holds
`--episodes` turns recorded through the Stop hook from a transcript in Claude Code's format. Each
measured prompt opens a new Claude Code session, so the episodic layer searches on every one (its
first-turn recall) and the identity layer answers too. In process: `prompt_context` on a runtime
loaded once, the hook's work without start-up. As a process: `thoth claude-code hook
UserPromptSubmit` with the hook's JSON on stdin, from start to exit, which is what Claude Code
waits for (Python start-up and plugin imports included; the `budget` caps only the rest).
Warm (issue 38): the same process with `thoth serve` running for the home, a thin client of it,
interleaved prompt by prompt with the in-process one (`THOTH_NO_SERVICE=1`) so load hits both alike;
`same_recall_content` counts the prompts whose additionalContext is the same both ways (of those
where both gave one), `warm_same_as_unbudgeted_in_process` the warm prompts whose context equals the
in-process measurement's (no budget) for the same prompt, and `ratio` is the in-process median over
the warm one.
Median and p90 in milliseconds.

    .venv/bin/python bench/claude_code_hook.py [--runs 20] [--episodes 40]
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

from service_running import service_running
from thoth_claude_code.hooks import Payload, for_hooks, prompt_context, record_finished_turns
from thoth_claude_code.settings import Settings
from thoth_claude_code.testing import Transcript, hook_input

from thoth_core.config import load_config
from thoth_core.runtime import Runtime

TOPICS = ["staging database", "release train", "invoice run", "on-call rota", "office wifi", "design review"]


def summary(seconds: list[float]) -> dict[str, float]:
    """Median and p90 in milliseconds."""
    ordered = sorted(seconds)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 1),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1),
    }


def make_home(root: Path) -> Path:
    """A fresh agent home; returns its thoth.toml."""
    thoth = Path(sys.executable).with_name("thoth")
    subprocess.run([str(thoth), "init", str(root / "agent")], check=True, capture_output=True, env=environment(None))
    return root / "agent" / "thoth.toml"


def environment(config: Path | None) -> dict[str, str]:
    """This process's environment without Thoth switches, naming the agent home's config."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "HONCHO_"))}
    return {**keep, "THOTH_CONFIG": str(config)} if config else keep


async def seed(config: Path, project: Path, episodes: int) -> None:
    """Record `episodes` turns through the Stop hook's code, in sessions of ten turns."""
    runtime = Runtime.load(config)
    settings = Settings.of(runtime.config)
    for start in range(0, episodes, 10):
        session_id = f"seed-{start}"
        log = Transcript(project / f"{session_id}.jsonl", session_id, cwd=str(project))
        for i in range(start, min(start + 10, episodes)):
            topic = TOPICS[i % len(TOPICS)]
            log.turn(f"Note {i}: the {topic} changed, entry {i * 7} applies now.", f"Noted the {topic} change ({i}).")
        payload = Payload.parse("Stop", hook_input("Stop", session_id, log.path, cwd=project))
        await record_finished_turns(for_hooks(runtime, settings), payload, settings)
    await runtime.aclose()


async def in_process(
    config: Path, project: Path, runs: int, contexts: dict[str, str] | None = None
) -> dict[str, float]:
    """The hook's work on a loaded runtime, per prompt (each in a new session); each prompt's context into contexts."""
    runtime = Runtime.load(config)
    settings = Settings.of(runtime.config)
    for_hooks(runtime, settings)
    times = []
    for i in range(runs + 3):
        prompt = f"What changed about the {TOPICS[i % len(TOPICS)]}?"
        payload = Payload.parse(
            "UserPromptSubmit", hook_input("UserPromptSubmit", f"bench-{i}", project / "x.jsonl", prompt=prompt)
        )
        started = time.perf_counter()
        output = await prompt_context(runtime, payload, settings)
        if i >= 3:  # warm-up: the embedder's first load
            times.append(time.perf_counter() - started)
        assert "related-episodes" in output, output[:300]
        if contexts is not None:
            contexts[prompt] = str(context_of(output))
    await runtime.aclose()
    return summary(times)


def as_process(config: Path, project: Path, runs: int) -> dict[str, object]:
    """`thoth claude-code hook UserPromptSubmit` from start to exit, per prompt."""
    thoth = str(Path(sys.executable).with_name("thoth"))
    env = environment(config)
    times, misses = [], 0
    for i in range(runs + 1):
        prompt = f"What changed about the {TOPICS[i % len(TOPICS)]}?"
        stdin = hook_input("UserPromptSubmit", f"proc-{i}", project / "x.jsonl", cwd=project, prompt=prompt)
        started = time.perf_counter()
        done = subprocess.run(
            [thoth, "claude-code", "hook", "UserPromptSubmit"],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            cwd=project,
        )
        if i >= 1:
            times.append(time.perf_counter() - started)
            misses += "related-episodes" not in done.stdout
    return {**summary(times), "prompts_without_recall": misses}


def context_of(stdout: str) -> str | None:
    """The additionalContext a hook printed, or None."""
    try:
        return str(json.loads(stdout)["hookSpecificOutput"]["additionalContext"])
    except (ValueError, KeyError, TypeError):
        return None


def both_ways(config: Path, project: Path, runs: int, reference: dict[str, str]) -> dict[str, object]:
    """The hook as a process with `thoth serve` running: warm (its client) and in-process, prompt by prompt."""
    thoth = str(Path(sys.executable).with_name("thoth"))
    env = environment(config)
    times: dict[str, list[float]] = {"warm": [], "cold": []}
    contexts: dict[str, list[str | None]] = {"warm": [], "cold": []}
    asked: list[str] = []
    floor: list[float] = []  # `python -c pass` between the prompts: the interpreter's own start-up, under the same load
    with service_running(config.parent, env):
        for i in range(runs + 1):
            prompt = f"What changed about the {TOPICS[i % len(TOPICS)]}?"
            for mode in ("warm", "cold") if i % 2 else ("cold", "warm"):
                stdin = hook_input("UserPromptSubmit", f"{mode}-{i}", project / "x.jsonl", cwd=project, prompt=prompt)
                started = time.perf_counter()
                done = subprocess.run(
                    [thoth, "claude-code", "hook", "UserPromptSubmit"],
                    input=stdin,
                    capture_output=True,
                    text=True,
                    env=dict(env, THOTH_NO_SERVICE="1") if mode == "cold" else env,
                    cwd=project,
                )
                if i >= 1:  # the first round warms the page cache (and the service's embedder)
                    times[mode].append(time.perf_counter() - started)
                    contexts[mode].append(context_of(done.stdout))
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor.append(time.perf_counter() - started)
            asked += [prompt] if i >= 1 else []
    pairs = [(w, c) for w, c in zip(contexts["warm"], contexts["cold"], strict=True) if w and c]
    warm, cold = summary(times["warm"]), summary(times["cold"])
    return {
        "process_warm": {
            **warm,
            "prompts_without_recall": sum("related-episodes" not in (c or "") for c in contexts["warm"]),
        },
        "process_in_process": {
            **cold,
            "prompts_without_recall": sum("related-episodes" not in (c or "") for c in contexts["cold"]),
        },
        "ratio": round(cold["median_ms"] / warm["median_ms"], 1),
        "python_floor": summary(floor[1:]),
        "same_recall_content": f"{sum(w == c for w, c in pairs)}/{len(pairs)}",
        "warm_same_as_unbudgeted_in_process": (
            f"{sum(w == reference.get(p) for w, p in zip(contexts['warm'], asked, strict=True))}/{len(asked)}"
        ),
    }


def startup(config: Path, runs: int) -> dict[str, float]:
    """`thoth claude-code --help`: Python start-up and plugin discovery, no runtime."""
    thoth = str(Path(sys.executable).with_name("thoth"))
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([thoth, "claude-code", "--help"], capture_output=True, env=environment(config), check=True)
        times.append(time.perf_counter() - started)
    return summary(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--episodes", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        config = make_home(root)
        project = root / "project"
        project.mkdir()
        os.environ.update(environment(config))
        for name in [n for n in os.environ if n.startswith("THOTH_") and n != "THOTH_CONFIG"]:
            del os.environ[name]
        asyncio.run(seed(config, project, args.episodes))
        reference: dict[str, str] = {}  # each prompt's context in-process without a budget: what warm should give
        result = {
            "in_process": asyncio.run(in_process(config, project, args.runs, reference)),
            "process": as_process(config, project, args.runs),
            **both_ways(config, project, args.runs, reference),
            "process_startup_only": startup(config, max(5, args.runs // 4)),
            "budget_s": Settings.of(load_config(config)).budget,
            "runs": args.runs,
            "episodes": args.episodes,
            "cpus": os.cpu_count(),
        }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
