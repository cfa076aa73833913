"""How often short commands exit 0 (an abort at exit is 134); prints JSON.

Each command runs `--runs` times against one home with the layers installed, as a user runs it.

    .venv/bin/python bench/clean_exits.py [--runs 100]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

COMMANDS = {
    "ask /remember": ["ask", "/remember I like green tea", "--peer", "ann"],
    "context": ["context", "green tea", "--peer", "ann"],
    "recall": ["recall", "green tea", "--peer", "ann"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    args = parser.parse_args()
    thoth = Path(sys.executable).with_name("thoth")
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_"))}
        env["THOTH_HOME"] = str(Path(folder) / "home")
        for name, command in COMMANDS.items():
            codes: Counter[int] = Counter()
            started = time.perf_counter()
            for _ in range(args.runs):
                done = subprocess.run([str(thoth), *command], cwd=folder, env=env, capture_output=True)
                codes[done.returncode] += 1
            seconds = time.perf_counter() - started
            results[name] = {
                "runs": args.runs,
                "exit_0": codes[0],
                "other_exits": {str(c): n for c, n in codes.items() if c != 0},
                "seconds_per_run": round(seconds / args.runs, 3),
            }
    print(json.dumps({"commands": results, "all_clean": all(r["exit_0"] == r["runs"] for r in results.values())}, indent=2))


if __name__ == "__main__":
    main()
