"""Cold start of the `thoth` command: a fresh process per run, every installed plugin; prints JSON.

Measured, each as median and p90 over `--runs` fresh processes (and as a ratio to the floor):
- `python_floor`: `python -c pass`, the interpreter's own start-up;
- `import_anthropic` and `import_openai`: `python -c "import anthropic; print()"` (or openai), each
  provider SDK alone: the first byte comes once it is imported, the exit after the interpreter
  has torn its modules down;
- `thoth_help`: `thoth --help` (plugin discovery included, since plugins add commands);
  `bench/cold_start_compare.py` sets this environment against an earlier commit's, interleaved;
- `ask_replay`, `ask_anthropic` and `ask_openai`: `thoth ask` in an agent home made by `thoth init`,
  answering from the replay model, from the `anthropic` provider talking to the local fake Messages
  API (thoth_core.testing.fake_anthropic), or from the `openai` provider talking to a local
  OpenAI-compatible server as Ollama's (thoth_core.testing.fake_openai, model `llama3.2`, no
  key): time to the first byte on stdout, and to exit (which includes the post-turn writes).
  The `_episodic_off` kinds are the same with EPISODIC_DISABLED=1: what the episodic layer
  (loading its embedder, waiting for it) costs.
- `ask_anthropic_warm` (issue 38): `thoth ask` in the anthropic home while `thoth serve` runs for it
  (started before the runs, through the same fake Messages API): the command is a thin client of
  the service; every other kind runs in-process then (`THOTH_NO_SERVICE=1`), and `warm_ratio` is
  `ask_anthropic`'s first byte median over the warm one's.
Each home keeps the turns of earlier runs, as a used home does (so episodic recall has past
episodes to embed the query against). The OS page cache is warm after the first run of each
kind (nothing here drops it), and so are the `__pycache__` bytecode files. `no_bytecode_cache`
is one extra run of each `thoth ask` with `PYTHONPYCACHEPREFIX` set to a fresh empty folder, so
Python compiles every module it imports from source: the first run after an install or an
upgrade (the source files still in the page cache).

    .venv/bin/python bench/cold_start.py [--runs 9] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from cold_start_compare import timed  # one timing for both benches: first byte, exit, peak RSS
from service_running import service_running

from thoth_core.testing.fake_anthropic import FakeAnthropic
from thoth_core.testing.fake_openai import FakeOpenAI

REPLY = "The quick brown fox jumps over the lazy dog."
THOTH = Path(sys.executable).with_name("thoth")


def summary(seconds: list[float], floor: float | None = None) -> dict[str, float]:
    """Median and p90 in milliseconds, and the median's ratio to the floor's."""
    ordered = sorted(seconds)
    median = statistics.median(ordered)
    result = {"median_ms": round(median * 1000, 1), "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 1)}
    if floor:
        result["x_floor"] = round(median / floor, 1)
    return result


def make_home(root: Path, env: dict[str, str], settings: dict[str, str]) -> Path:
    """An agent home from `thoth init`, with `settings` applied through `thoth config set`."""
    home = root / "home"
    subprocess.run([str(THOTH), "init", str(home)], env=env, check=True, capture_output=True)
    for key, value in settings.items():
        subprocess.run([str(THOTH), "config", "set", key, value], env=env, cwd=home, check=True, capture_output=True)
    return home


def measure(runs: int) -> dict[str, Any]:
    """Every figure, interleaving the kinds run by run so that load from other processes hits them alike."""
    fake, local = FakeAnthropic(replies=[REPLY]).start(), FakeOpenAI(replies=[REPLY]).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "OPENAI_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # set in some sandboxes: Thoth's own modules would compile every run
    try:
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            (root / "replay.json").write_text(json.dumps([{"purpose": "turn", "reply": REPLY}, {"reply": "{}"}]))
            replay_home = make_home(
                root / "replay", env, {"thoth.model": "replay", "models.replay.file": str(root / "replay.json")}
            )
            claude_env = dict(env, ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="bench")
            claude_home = make_home(root / "claude", claude_env, {"thoth.model": "anthropic"})
            local_settings = {"thoth.model": "openai", "models.openai.base_url": local.url}
            local_home = make_home(root / "local", env, local_settings | {"models.openai.model": "llama3.2"})
            kinds: dict[str, tuple[list[str], dict[str, str], Path]] = {
                "python_floor": ([sys.executable, "-c", "pass"], env, root),
                "import_anthropic": ([sys.executable, "-c", "import anthropic; print()"], env, root),
                "import_openai": ([sys.executable, "-c", "import openai; print()"], env, root),
                "thoth_help": ([str(THOTH), "--help"], env, root),
                "ask_replay": ([str(THOTH), "ask", "hello"], env, replay_home),
                "ask_anthropic": ([str(THOTH), "ask", "hello"], claude_env, claude_home),
                "ask_openai": ([str(THOTH), "ask", "hello"], env, local_home),
                "ask_replay_episodic_off": (
                    [str(THOTH), "ask", "hello"],
                    dict(env, EPISODIC_DISABLED="1"),
                    replay_home,
                ),
                "ask_anthropic_episodic_off": (
                    [str(THOTH), "ask", "hello"],
                    dict(claude_env, EPISODIC_DISABLED="1"),
                    claude_home,
                ),
            }
            kinds = {
                name: (command, dict(run_env, THOTH_NO_SERVICE="1"), cwd)
                for name, (command, run_env, cwd) in kinds.items()
            }
            kinds["ask_anthropic_warm"] = ([str(THOTH), "ask", "hello"], claude_env, claude_home)
            firsts: dict[str, list[float]] = {name: [] for name in kinds}
            exits: dict[str, list[float]] = {name: [] for name in kinds}
            with service_running(claude_home, claude_env):
                for run in range(runs + 1):
                    for name, (command, run_env, cwd) in kinds.items():
                        first, whole, _ = timed(command, run_env, cwd)
                        if run:  # the first round warms the page cache and the bytecode files
                            firsts[name].append(first)
                            exits[name].append(whole)
            no_cache = {}
            for name in ("ask_replay", "ask_anthropic", "ask_openai"):
                command, run_env, cwd = kinds[name]
                with tempfile.TemporaryDirectory() as prefix:
                    first, whole, _ = timed(command, dict(run_env, PYTHONPYCACHEPREFIX=prefix), cwd)
                no_cache[name] = {"first_byte_ms": round(first * 1000, 1), "exit_ms": round(whole * 1000, 1)}
    finally:
        fake.stop()
        local.stop()
    floor = statistics.median(exits["python_floor"])
    result: dict[str, Any] = {"runs": runs, "cpus": os.cpu_count(), "load_average": os.getloadavg()}
    for name in kinds:
        if name.startswith(("ask_", "import_")):
            result[name] = {"first_byte": summary(firsts[name], floor), "exit": summary(exits[name], floor)}
        else:
            result[name] = summary(exits[name], floor)
    result["warm_ratio"] = round(
        result["ask_anthropic"]["first_byte"]["median_ms"] / result["ask_anthropic_warm"]["first_byte"]["median_ms"], 1
    )
    result["no_bytecode_cache"] = no_cache
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="Measured runs of each kind (after one warm-up round).")
    parser.add_argument("--json", action="store_true", help="One line of JSON (default: indented).")
    args = parser.parse_args()
    result = measure(args.runs)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
