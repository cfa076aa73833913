"""Kill `thoth ask` at random moments, restart, and count replied turns a layer lost; prints JSON.

An agent home made by `thoth init`, the fake Anthropic server answering. Each trial runs one
`thoth ask` and SIGKILLs it: half the trials the moment the whole reply is on stdout, the others
after a random delay within a typical run's length. A turn counts as replied when its whole
reply was printed before the kill. After the trials one `thoth context` starts (replaying the
journal), then each replied turn is looked for in every layer that writes turns: working
(transcripts), episodic (episodes) and identity (messages). Also measured in the same run: the
journal's own cost per turn (a synced append plus striking it off), median over 200 turns.

    .venv/bin/python bench/chaos_turns.py [--trials 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from thoth_core.journal import TurnJournal
from thoth_core.testing.fake_anthropic import FakeAnthropic
from thoth_core.types import Reply, Session, Turn

REPLY = "Noted, thank you."
THOTH = Path(sys.executable).with_name("thoth")


def journal_cost_ms(folder: Path, turns: int = 200) -> float:
    """Median milliseconds of one journaled turn: the synced append and its settle."""
    journal = TurnJournal(folder / "journal.db")
    session = Session("default", "ann", "t")
    times = []
    for i in range(turns):
        turn = Turn(f"turn {i} " + "words " * 40, "ann", "t")
        started = time.perf_counter()
        journal.append(turn, Reply(REPLY * 4), session, ["working", "identity", "episodic"])
        journal.settle(turn.id, done=["working", "identity", "episodic"], failed={})
        times.append((time.perf_counter() - started) * 1000)
    journal.close()
    return round(statistics.median(times), 3)


def run_trial(home: Path, env: dict[str, str], text: str, *, kill_after: float | None) -> bool:
    """One `thoth ask`, killed right after its reply (kill_after None) or after kill_after seconds; replied?"""
    process = subprocess.Popen(
        [str(THOTH), "ask", text, "--peer", "ann", "--thread", "chaos"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + (kill_after if kill_after is not None else 60)
    while time.monotonic() < deadline and process.poll() is None:
        seen += process.stdout.read() or b""
        if kill_after is None and REPLY.encode() + b"\n" in seen:
            break
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    seen += process.stdout.read() or b""
    return REPLY.encode() + b"\n" in seen


def duplicated(home: Path, env: dict[str, str], texts: list[str]) -> dict[str, int]:
    """Replied turns stored more than once: transcript turn lines, episodes."""
    lines = [
        line for p in (home / ".thoth" / "working").rglob("*.jsonl") for line in p.read_text().splitlines()
        if '"type": "turn"' in line or '"type":"turn"' in line
    ]
    episodes = subprocess.run(
        [str(THOTH), "episodes", "list", "--peer", "ann", "--limit", "0", "--json"],
        cwd=home, env=env, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    stores = {
        "working": [json.loads(line)["user"] for line in lines],
        "episodic": [json.loads(line)["user"] for line in episodes],
    }
    return {layer: sum(1 for t in texts if users.count(t) > 1) for layer, users in stores.items()}


def found_in_layers(home: Path, env: dict[str, str], texts: list[str]) -> dict[str, list[str]]:
    """For each layer, the replied turn texts it does not hold."""
    transcripts = "".join(p.read_text() for p in (home / ".thoth" / "working").rglob("*.jsonl"))
    episodes = subprocess.run(
        [str(THOTH), "episodes", "list", "--peer", "ann", "--limit", "0", "--json"],
        cwd=home, env=env, capture_output=True, text=True, check=True,
    ).stdout
    identity = subprocess.run(
        [str(THOTH), "identity", "export", "--peer", "ann"], cwd=home, env=env, capture_output=True, text=True, check=True
    ).stdout
    stores = {"working": transcripts, "episodic": episodes, "identity": identity}
    return {layer: [t for t in texts if t not in held] for layer, held in stores.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    chance = random.Random(args.seed)
    fake = FakeAnthropic().start()
    fake.replies = [{"reply": REPLY}]
    try:
        with tempfile.TemporaryDirectory() as folder:
            home = Path(folder) / "agent"
            env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "HONCHO_"))}
            env.update(ANTHROPIC_BASE_URL=fake.url, ANTHROPIC_API_KEY="bench")
            subprocess.run([str(THOTH), "init", str(home)], env=env, check=True, capture_output=True)
            started = time.perf_counter()
            assert run_trial(home, env, "warm-up turn", kill_after=120), "a whole run did not reply"
            whole_run = time.perf_counter() - started
            replied, modes = [], {"after_reply": 0, "random": 0}
            for i in range(args.trials):
                text = f"chaos turn {i} about item{chance.randrange(10**6)}"
                after_reply = i % 2 == 0
                modes["after_reply" if after_reply else "random"] += 1
                if run_trial(home, env, text, kill_after=None if after_reply else chance.uniform(0, whole_run)):
                    replied.append(text)
            restart = subprocess.run(
                [str(THOTH), "context", "hello", "--peer", "ann", "--thread", "after"],
                cwd=home, env=env, capture_output=True, text=True,
            )
            missing = found_in_layers(home, env, replied)
            twice = duplicated(home, env, replied)
            left = TurnJournal(home / ".thoth" / "journal.db").pending()
            cost = journal_cost_ms(Path(folder))
    finally:
        fake.stop()
    print(json.dumps({
        "trials": args.trials,
        "kill_modes": modes,
        "whole_run_s": round(whole_run, 2),
        "replied_turns": len(replied),
        "missing_after_restart": {layer: len(texts) for layer, texts in missing.items()},
        "missing_examples": {layer: texts[:3] for layer, texts in missing.items() if texts},
        "stored_twice": twice,
        "journal_left_pending": len(left),
        "restart_exit_code": restart.returncode,
        "journal_cost_per_turn_ms_median": cost,
    }, indent=2))


if __name__ == "__main__":
    main()
