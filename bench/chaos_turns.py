"""Kill `thoth ask` at random moments and mid-stream, restart, and count turns a layer lost; prints JSON.

An agent home made by `thoth init`, the fake Anthropic server answering. Each trial runs one
`thoth ask` and SIGKILLs it, in turn: the moment the whole reply is on stdout; after a random
delay within a typical run's length; when the reply's first words are on stdout (the fake holds
the stream after its first delta); and after the reply's last word but before the stream's end
event (a one-word reply, held the same way). A turn counts as replied when its whole reply was
printed before the kill. After the trials one `thoth context` starts (replaying the journal),
then each replied turn is looked for in every layer that writes turns: working (transcripts),
episodic (episodes) and identity (messages); and each mid-stream turn's user message and reply
as far as it was shown, marked cut short (`mid_stream_lost`: the target is 0 everywhere). Also
measured in the same run: the journal's own cost per turn, median over 200 turns: the old path
(a synced append of the replied turn plus striking it off) and the whole new one (the message
accepted, one synced batch of the streaming reply, the whole reply, struck off), and one batch
alone (a streaming reply syncs one at most every `thoth_core.writes.PROGRESS_EVERY` s).

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
import threading
import time
from pathlib import Path

from thoth_core.journal import TurnJournal
from thoth_core.testing.fake_anthropic import FakeAnthropic
from thoth_core.types import CUT_SHORT, Reply, Session, Turn
from thoth_core.writes import PROGRESS_EVERY

REPLY = "Noted, thank you."
ONE_WORD = "Noted."  # the mid-stream kill after the last word: its only delta is its last
THOTH = Path(sys.executable).with_name("thoth")
LAYERS = ("working", "episodic", "identity")


def journal_cost_ms(folder: Path, turns: int = 200) -> dict[str, float]:
    """Median milliseconds per turn of the journal's syncs: the old path, the whole new one, one streamed batch."""
    journal = TurnJournal(folder / "journal.db")
    session = Session("default", "ann", "t")
    writers = ["working", "identity", "episodic"]
    old, new, batch = [], [], []
    for i in range(turns):
        turn = Turn(f"turn {i} " + "words " * 40, "ann", "t")
        started = time.perf_counter()
        journal.append(turn, Reply(REPLY * 4), session, writers)
        journal.settle(turn.id, done=writers, failed={})
        old.append((time.perf_counter() - started) * 1000)
        turn = Turn(f"new turn {i} " + "words " * 40, "ann", "t")
        started = time.perf_counter()
        journal.append(turn, Reply.cut(""), session, writers)  # accepted, before the model is called
        shown = time.perf_counter()
        journal.progress(turn.id, Reply.cut(REPLY * 2))  # one batch of the streaming reply
        batch.append((time.perf_counter() - shown) * 1000)
        journal.append(turn, Reply(REPLY * 4), session, writers)  # the whole reply
        journal.settle(turn.id, done=writers, failed={})
        new.append((time.perf_counter() - started) * 1000)
    journal.close()
    return {
        "replied_turn_only": round(statistics.median(old), 3),
        "accepted_streamed_replied": round(statistics.median(new), 3),
        "one_streamed_batch": round(statistics.median(batch), 3),
    }


def spawn_ask(home: Path, env: dict[str, str], text: str) -> subprocess.Popen[bytes]:
    """A `thoth ask` in the chaos thread whose stdout can be read without blocking."""
    process = subprocess.Popen(
        [str(THOTH), "ask", text, "--peer", "ann", "--thread", "chaos"],
        cwd=home,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    return process


def ask_until(home: Path, env: dict[str, str], text: str, shown: bytes) -> str:
    """One `thoth ask`, SIGKILLed once `shown` is on its stdout; returns what it had shown."""
    process = spawn_ask(home, env, text)
    seen = b""
    deadline = time.monotonic() + 60
    while shown not in seen and process.poll() is None and time.monotonic() < deadline:
        seen += process.stdout.read() or b""
        time.sleep(0.002)
    process.send_signal(signal.SIGKILL)
    process.wait()
    return seen.decode(errors="replace")


def mid_stream_trial(fake: FakeAnthropic, home: Path, env: dict[str, str], text: str, *, last_word: bool) -> str:
    """Kill `thoth ask` while the fake holds the stream (after its first delta); returns what was shown."""
    hold = threading.Event()
    fake.replies = [{"reply": ONE_WORD if last_word else REPLY, "pause": hold}]
    try:
        return ask_until(home, env, text, ONE_WORD.encode() if last_word else b"Noted")
    finally:
        hold.set()
        fake.replies = [{"reply": REPLY}]


def kept_replies(home: Path, env: dict[str, str]) -> dict[str, dict[str, list[str]]]:
    """Per layer, user message -> the replies stored with it."""
    kept: dict[str, dict[str, list[str]]] = {layer: {} for layer in LAYERS}
    for path in (home / ".thoth" / "working").rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            if entry.get("type") == "turn":
                kept["working"].setdefault(entry["user"], []).append(entry["assistant"])
    episodes = subprocess.run(
        [str(THOTH), "episodes", "list", "--peer", "ann", "--limit", "0", "--json"],
        cwd=home, env=env, capture_output=True, text=True, check=True,
    ).stdout.splitlines()
    for line in episodes:
        episode = json.loads(line)
        kept["episodic"].setdefault(episode["user"], []).append(episode["assistant"])
    export = [str(THOTH), "identity", "export", "--peer", "ann"]
    identity = subprocess.run(export, cwd=home, env=env, capture_output=True, text=True, check=True).stdout
    messages = _messages(json.loads(identity))
    for first, second in zip(messages, messages[1:]):
        if first.get("role") == "user" and second.get("role") == "assistant":
            kept["identity"].setdefault(first["content"], []).append(second["content"])
    return kept


def _messages(value: object) -> list[dict]:
    """Every object with a role and content anywhere in an identity export, in order."""
    if isinstance(value, dict):
        if "role" in value and "content" in value:
            return [value]
        return [m for v in value.values() for m in _messages(v)]
    if isinstance(value, list):
        return [m for v in value for m in _messages(v)]
    return []


def mid_stream_lost(kept: dict[str, dict[str, list[str]]], trials: list[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """Per layer, mid-stream turns whose message is missing, and whose reply lacks what was shown or its mark."""
    lost = {}
    for layer in LAYERS:
        message = partial = 0
        for text, shown in trials:
            replies = kept[layer].get(text)
            if not replies:
                message += 1
            elif not any(r.startswith(shown.rstrip("\n")) and r.endswith(CUT_SHORT) for r in replies):
                partial += 1
        lost[layer] = {"user_message": message, "partial_reply": partial}
    return lost


def run_trial(home: Path, env: dict[str, str], text: str, *, kill_after: float | None) -> bool:
    """One `thoth ask`, killed right after its reply (kill_after None) or after kill_after seconds; replied?"""
    process = spawn_ask(home, env, text)
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
    export = [str(THOTH), "identity", "export", "--peer", "ann"]
    identity = subprocess.run(export, cwd=home, env=env, capture_output=True, text=True, check=True).stdout
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
            replied, modes = [], {"after_reply": 0, "random": 0, "first_words": 0, "after_last_word": 0}
            mid_stream: dict[str, list[tuple[str, str]]] = {"first_words": [], "after_last_word": []}
            for i in range(args.trials):
                text = f"chaos turn {i} about item{chance.randrange(10**6)}"
                mode = ("after_reply", "random", "first_words", "after_last_word")[i % 4]
                modes[mode] += 1
                if mode in mid_stream:
                    shown = mid_stream_trial(fake, home, env, text, last_word=mode == "after_last_word")
                    mid_stream[mode].append((text, shown))
                    continue
                kill_after = None if mode == "after_reply" else chance.uniform(0, whole_run)
                if run_trial(home, env, text, kill_after=kill_after):
                    replied.append(text)
            restart = subprocess.run(
                [str(THOTH), "context", "hello", "--peer", "ann", "--thread", "after"],
                cwd=home, env=env, capture_output=True, text=True,
            )
            missing = found_in_layers(home, env, replied)
            twice = duplicated(home, env, replied + [text for trials in mid_stream.values() for text, _ in trials])
            kept = kept_replies(home, env)
            lost = {mode: mid_stream_lost(kept, trials) for mode, trials in mid_stream.items()}
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
        "mid_stream_turns": {mode: len(trials) for mode, trials in mid_stream.items()},
        "mid_stream_lost": lost,
        "mid_stream_shown": {mode: sorted({shown for _, shown in trials}) for mode, trials in mid_stream.items()},
        "stored_twice": twice,
        "journal_left_pending": len(left),
        "journal_left_examples": [
            {"user": e.turn.text, "reply": e.reply.text, "plugins": e.plugins, "attempts": e.attempts, "error": e.error}
            for e in left[:3]
        ],
        "restart_exit_code": restart.returncode,
        "journal_cost_per_turn_ms_median": cost,
        "streamed_batch_every_s": PROGRESS_EVERY,
    }, indent=2))


if __name__ == "__main__":
    main()
