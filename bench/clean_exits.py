"""How often short commands exit 0 (134 or -6 is an abort at exit), with Honcho fine, slow, hung or down; JSON.

Each command runs `--runs` times in a new process, as a user runs it, against one home per case:

- `plain`: the embedded identity backend (no Honcho);
- `honcho-slow`: the real Honcho of `../shared/honcho-real` behind a loopback proxy that delays
  each dialectic by 1-4 s, so it times out and is abandoned (the exit-134 case of issue 35);
  skipped with a note when that folder is absent (`THOTH_HONCHO_REAL_DIR` picks the server's DIR);
- `honcho-hung`: a fake Honcho that accepts connections and never answers;
- `honcho-down`: nothing listens at the configured URL.

For the Honcho cases it also reports how many of the turns' identity messages wait in the outbox
afterwards (they must all be there: nothing reached Honcho, nothing was dropped).

    .venv/bin/python bench/clean_exits.py [--runs 50] [--cases plain,honcho-slow,honcho-hung,honcho-down]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from thoth_identity import honcho_real
from thoth_identity.fake_honcho import FakeHoncho, free_port

REPO = Path(__file__).resolve().parents[1]
PLAIN = {
    "ask /remember": ["ask", "/remember I like green tea", "--peer", "ann"],
    "context": ["context", "green tea", "--peer", "ann"],
    "recall": ["recall", "green tea", "--peer", "ann"],
}
HONCHO = {
    "ask": ["ask", "what tea do I like?", "--peer", "ann"],
    "context": ["context", "green tea", "--peer", "ann", "--json"],
    "recall": ["recall", "green tea", "--peer", "ann"],
}
ABANDONED = "Honcho dialectic for peer ann failed (no answer in time)"


def run_case(thoth: Path, env: dict[str, str], cwd: Path, commands: dict[str, list[str]], runs: int) -> dict:
    """Each command `runs` times: exit codes, seconds, and how often the dialectic was abandoned."""
    results = {}
    for name, command in commands.items():
        codes: Counter[int] = Counter()
        seconds, abandoned = [], 0
        for _ in range(runs):
            started = time.perf_counter()
            done = subprocess.run([str(thoth), *command], cwd=cwd, env=env, capture_output=True, text=True)
            seconds.append(time.perf_counter() - started)
            codes[done.returncode] += 1
            abandoned += ABANDONED in done.stderr
        results[name] = {
            "runs": runs,
            "exit_0": codes[0],
            "other_exits": {str(c): n for c, n in codes.items() if c != 0},
            "dialectic_abandoned": abandoned,
            "median_seconds": round(statistics.median(seconds), 3),
            "max_seconds": round(max(seconds), 3),
        }
    return results


def honcho_home(folder: Path, url: str) -> tuple[dict[str, str], Path]:
    """An environment whose thoth.toml points identity at `url` (a new Honcho workspace) and replays a model."""
    config = folder / "thoth.toml"
    config.write_text(
        '[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{reply = "Green tea, you said."}]\n'
        f'[plugins.identity]\nbase_url = "{url}"\nworkspace = "bench-{uuid.uuid4().hex[:8]}"\n'
    )
    env = base_env(folder)
    env["THOTH_CONFIG"] = str(config)
    return env, config


def base_env(folder: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "HONCHO_"))}
    env["THOTH_HOME"] = str(folder / "home")
    return env


def waiting(thoth: Path, env: dict[str, str], cwd: Path) -> int | None:
    """Identity messages of ann waiting in the Honcho outbox (from `thoth identity show`)."""
    shown = subprocess.run([str(thoth), "identity", "show", "--peer", "ann"], cwd=cwd, env=env, capture_output=True)
    found = re.search(r"pending_ingest (\d+)", shown.stdout.decode())
    return int(found.group(1)) if found else None


def honcho_case(thoth: Path, folder: Path, url: str, runs: int, commands: dict[str, list[str]]) -> dict:
    """The commands against one Honcho URL, then the outbox count against what the turns wrote."""
    env, _ = honcho_home(folder, url)
    subprocess.run([str(thoth), "ask", "/remember I like green tea", "--peer", "ann"], cwd=folder, env=env, check=True)
    results = run_case(thoth, env, folder, commands, runs)
    turns = runs if "ask" in commands else 0
    return {"commands": results, "turn_messages": 2 * turns, "waiting_in_outbox": waiting(thoth, env, folder)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--cases", default="plain,honcho-slow,honcho-hung,honcho-down")
    args = parser.parse_args()
    thoth = Path(sys.executable).with_name("thoth")
    cases, notes = {}, []
    for case in args.cases.split(","):
        with tempfile.TemporaryDirectory() as name:
            folder = Path(name)
            if case == "plain":
                cases[case] = {"commands": run_case(thoth, base_env(folder), folder, PLAIN, args.runs)}
            elif case == "honcho-slow":
                scripts = honcho_real.scripts_folder(REPO)
                if not (scripts / "start").exists():
                    notes.append(f"honcho-slow skipped: {scripts} is absent")
                    continue
                url, _ = honcho_real.start(scripts, honcho_real.server_dir())
                proxy = honcho_real.SlowProxy(url, delay=(1.0, 4.0)).start()
                try:
                    slow = {"context": HONCHO["context"], "ask": HONCHO["ask"]}
                    cases[case] = honcho_case(thoth, folder, proxy.url, args.runs, slow)
                    cases[case]["dialectics_delayed"] = proxy.held
                finally:
                    proxy.stop()
            elif case in ("honcho-hung", "honcho-down"):
                fake = FakeHoncho().start() if case == "honcho-hung" else None
                url = fake.url if fake else f"http://127.0.0.1:{free_port()}"
                try:
                    if fake:
                        fake.mode = "hang"
                    cases[case] = honcho_case(thoth, folder, url, args.runs, HONCHO)
                finally:
                    if fake:
                        fake.stop()
            else:
                parser.error(f"unknown case {case!r}")
    clean = all(r["exit_0"] == r["runs"] for c in cases.values() for r in c["commands"].values())
    print(json.dumps({"runs": args.runs, "cases": cases, "all_clean": clean, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
