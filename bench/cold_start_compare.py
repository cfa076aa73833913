"""Cold start of `thoth` in this environment against another one (a checkout of an earlier commit); prints JSON.

Both sides run the same commands, interleaved run by run (before, after, after, before, ...) so
that load from other processes hits them alike, each in an agent home that side's `thoth init`
made, with every installed plugin loaded:
- `help`: `thoth --help`;
- `context`: `thoth context hello` (no model is asked);
- `ask_anthropic`: `thoth ask hello` through the `anthropic` provider and the fake Messages API
  (thoth_core.testing.fake_anthropic) on 127.0.0.1;
- `ask_openai`: the same through the `openai` provider and a fake OpenAI-compatible server
  (thoth_core.testing.fake_openai, model `llama3.2`, no key), as a local Ollama.
Each kind gives the median time to the first byte on stdout and to exit, and the median peak RSS
(the process's own, from wait4); `ratio` is after / before. The first round of each side is a
warm-up (page cache, bytecode files) and is not counted.

    .venv/bin/python bench/cold_start_compare.py --before /tmp/before-venv/bin [--after BIN] [--runs 9]
        [--side NAME=BIN ...]

`--side` adds more environments to the same interleaved runs (a variant with one change left
out, to see what each change pays); each gets `ratio_NAME`, its figures over before's.

An earlier commit's environment: `git worktree add --detach /tmp/before COMMIT`, then a venv with
it and its plugins installed editable (`scripts/dev setup` run there, or a copy of .venv whose
editable paths point at the worktree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from thoth_core.testing.fake_anthropic import FakeAnthropic
from thoth_core.testing.fake_openai import FakeOpenAI

REPLY = "The quick brown fox jumps over the lazy dog."
KINDS = ("help", "context", "ask_anthropic", "ask_openai")
UNSAVED_EXIT = 3  # `thoth ask` showed the reply, but a layer kept the turn for later (busy machine): timed all the same


def timed(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """Seconds to the first byte on stdout and to exit, and peak RSS in KiB, of one fresh process."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd)
    assert process.stdout is not None
    process.stdout.read(1)
    first = time.perf_counter() - started
    process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    whole = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode not in (0, UNSAVED_EXIT):
        raise SystemExit(f"{' '.join(command)} failed with exit code {process.returncode}")
    return first, whole, usage.ru_maxrss


def make_home(thoth: Path, root: Path, env: dict[str, str], settings: dict[str, str]) -> Path:
    """An agent home from this side's `thoth init`, with `settings` applied through `thoth config set`."""
    home = root / "home"
    subprocess.run([str(thoth), "init", str(home)], env=env, check=True, capture_output=True)
    for key, value in settings.items():
        subprocess.run([str(thoth), "config", "set", key, value], env=env, cwd=home, check=True, capture_output=True)
    return home


def side_commands(
    thoth: Path, root: Path, env: dict[str, str], anthropic_url: str, openai_url: str
) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """Each kind's command line, environment and working directory for one side."""
    claude_env = dict(env, ANTHROPIC_BASE_URL=anthropic_url, ANTHROPIC_API_KEY="bench")
    claude = make_home(thoth, root / "claude", claude_env, {"thoth.model": "anthropic"})
    local = make_home(
        thoth,
        root / "local",
        env,
        {"thoth.model": "openai", "models.openai.base_url": openai_url, "models.openai.model": "llama3.2"},
    )
    return {
        "help": ([str(thoth), "--help"], env, root),
        "context": ([str(thoth), "context", "hello"], claude_env, claude),
        "ask_anthropic": ([str(thoth), "ask", "hello"], claude_env, claude),
        "ask_openai": ([str(thoth), "ask", "hello"], env, local),
    }


def median_of(values: list[float], scale: float = 1000.0) -> float:
    return round(statistics.median(values) * scale, 1)


def measure(before_bin: Path, after_bin: Path, runs: int, extra: dict[str, Path] | None = None) -> dict[str, Any]:
    """Every figure for every side, interleaved."""
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    anthropic, local = FakeAnthropic(replies=[REPLY]).start(), FakeOpenAI(replies=[REPLY]).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # set in some sandboxes: every module would compile every run
    env.pop("VIRTUAL_ENV", None)
    sides = {"before": before_bin / "thoth", "after": after_bin / "thoth"}
    sides.update({name: folder / "thoth" for name, folder in (extra or {}).items()})
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        side: {kind: {"first": [], "exit": [], "rss": []} for kind in KINDS} for side in sides
    }
    try:
        with tempfile.TemporaryDirectory() as scratch:
            commands = {
                side: side_commands(thoth, Path(scratch) / side, env, anthropic.url, local.url)
                for side, thoth in sides.items()
            }
            for run in range(runs + 1):
                turn = run % len(sides)  # each side leads in turn, and the order reverses every other run
                order = list(sides)[turn:] + list(sides)[:turn]
                order = order if run % 2 else order[::-1]
                for kind in KINDS:
                    for side in order:
                        command, run_env, cwd = commands[side][kind]
                        first, whole, rss = timed(command, run_env, cwd)
                        if run:  # the first round warms the page cache and the bytecode files
                            samples[side][kind]["first"].append(first)
                            samples[side][kind]["exit"].append(whole)
                            samples[side][kind]["rss"].append(rss)
    finally:
        anthropic.stop()
        local.stop()
    result: dict[str, Any] = {
        "runs": runs,
        "cpus": os.cpu_count(),
        "load_average": {"start": load_at_start, "end": [round(x, 2) for x in os.getloadavg()]},  # 1, 5, 15 min
    }
    for kind in KINDS:
        figures = {
            side: {
                "first_byte_ms": median_of(samples[side][kind]["first"]),
                "exit_ms": median_of(samples[side][kind]["exit"]),
                "peak_rss_mb": median_of(samples[side][kind]["rss"], 1 / 1024),
            }
            for side in sides
        }
        for side in list(figures)[1:]:
            ratio = "ratio" if side == "after" else f"ratio_{side}"
            figures[ratio] = {key: round(figures[side][key] / figures["before"][key], 2) for key in figures[side]}
        result[kind] = figures
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="The bin/ folder of the other environment.")
    parser.add_argument(
        "--after",
        type=Path,
        default=Path(sys.executable).parent,
        help="The bin/ folder to compare (default: this one).",
    )
    parser.add_argument("--runs", type=int, default=9, help="Measured runs of each kind and side (after a warm-up).")
    parser.add_argument(
        "--side", action="append", default=[], metavar="NAME=BIN", help="One more environment's bin/ folder."
    )
    args = parser.parse_args()
    extra = dict(item.split("=", 1) for item in args.side)
    if not all(name.isidentifier() and name not in ("before", "after") for name in extra):
        parser.error("--side NAME=BIN: NAME is a word other than before and after")
    result = measure(args.before, args.after, args.runs, {name: Path(folder) for name, folder in extra.items()})
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
