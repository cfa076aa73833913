"""Model calls and tokens per turn over a 20-turn session, through a fake OpenAI-compatible server; prints JSON.

Each variant gets a fresh agent home made by `thoth init` (every installed plugin, the default
config) whose model is the `openai` provider pointed at `thoth_core.testing.fake_openai` on
127.0.0.1. One peer runs `--turns` turns in one thread (messages that state facts about them),
then the session ends (`done`) and the runtime closes, so what session end and exit derive is
counted too. The figures are the requests the server received, by purpose (told by the
request's system prompt: `turn`, `derive`, `dialectic`, `reflection` and `other`, the last two
answered `{}`), and the prompt and completion tokens the server reported (four characters a
token, as the fake counts them).

`--sessions` (2) sessions run one after the other in the same home (new thread each), so the
second shows a home that already holds observations. Variants: `before` is the schedule before
batching (`[plugins.identity] derive_every = 1`, `synthesis = true`: derivation after each turn,
the dialectic before each reply); `after` is the default config; `after_with_synthesis` turns the
dialectic on; `after_cheap_model` adds `[plugins.identity] model = "openai"` with
`model_options = {model = "small-model"}` (the requests' `model` field shows which model each
went to). The derivation answers are built from
the turns' text (`I live in Oslo` -> location Oslo), so observations and facts are really kept and
the identity block grows as it would.

    .venv/bin/python bench/model_calls.py [--turns 20] [--sessions 2]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from thoth_core.runtime import Runtime
from thoth_core.testing.fake_openai import FakeOpenAI, usage_of

MESSAGES = [
    "Hi, my name is Ada and I live in Oslo.",
    "I work as a nurse at the city hospital.",
    "Can you suggest a quick dinner for tonight?",
    "I like sailing on weekends.",
    "What is a good book about the sea?",
    "My sister Maria lives in Berlin.",
    "I prefer short answers, please.",
    "How do I keep a sourdough starter alive?",
    "I speak Norwegian and English.",
    "What is the weather usually like in Bergen?",
]
REPLY = "Here is a short answer to that, with one practical suggestion to try."
FACTS = [  # (pattern in the message, predicate)
    (r"my name is (\w+)", "name"),
    (r"I live in (\w+)", "location"),
    (r"I work as an? (\w+)", "profession"),
    (r"I like (\w+)", "likes"),
    (r"I prefer ([\w ]+?)[,.]", "preference"),
    (r"I speak (\w+)", "language"),
]


def derivation(message: str, turn: int | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a deriver would say about one message (observations, facts), each item naming its turn when batched."""
    mark = {} if turn is None else {"turn": turn}
    facts = [
        {**mark, "subject": "", "predicate": predicate, "value": found.group(1), "confidence": 0.95}
        for pattern, predicate in FACTS
        if (found := re.search(pattern, message, re.IGNORECASE))
    ]
    observations = [{**mark, "content": f"The person said: {message}", "kind": "explicit", "confidence": 0.8}]
    return observations, facts


def purpose(body: dict[str, Any]) -> str:
    """What a request is for, told by its system prompt."""
    system = " ".join(str(m.get("content")) for m in body.get("messages", []) if m.get("role") == "system")
    if "theory of mind" in system:
        return "derive"
    if "dialectic" in system:
        return "dialectic"
    if "You review a finished conversation" in system:
        return "reflection"
    return "other" if "Answer with one JSON object" in system else "turn"


def answer(body: dict[str, Any]) -> str:
    """The fake model's reply: a derivation for derive requests, a short text otherwise."""
    kind = purpose(body)
    if kind in ("reflection", "other"):
        return "{}"  # a valid answer with nothing in it
    if kind != "derive":
        return "Ada sails and lives in Oslo; keep it short." if kind == "dialectic" else REPLY
    text = str(body["messages"][-1]["content"])
    turns = re.findall(r'<turn n="(\d+)">.*?<message>\n(.*?)\n</message>', text, re.DOTALL)
    observations: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    for number, message in turns or [(None, text)]:
        o, f = derivation(message, int(number) if number else None)
        observations += o
        facts += f
    return json.dumps({"observations": observations, "facts": facts})


def make_home(root: Path, fake: FakeOpenAI, identity: dict[str, Any]) -> Path:
    """A fresh agent home (`thoth init`, then `thoth config set`) using the fake server; returns its thoth.toml."""
    thoth = str(Path(sys.executable).with_name("thoth"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "OPENAI_", "HONCHO_"))}
    subprocess.run([thoth, "init", str(root)], check=True, capture_output=True, env=env)
    settings = {
        "thoth.model": "openai",
        "models.openai.base_url": fake.url,
        "models.openai.model": "llama3.2",
        **{f"plugins.identity.{key}": value for key, value in identity.items()},
    }
    for key, value in settings.items():
        shown = value if isinstance(value, str) else toml(value)
        subprocess.run([thoth, "config", "set", key, shown], check=True, capture_output=True, env=env, cwd=root)
    return root / "thoth.toml"


def toml(value: Any) -> str:
    """A TOML value (numbers, strings, inline tables)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(value)


async def session(config: Path, turns: int, thread: str) -> None:
    """One peer's session of `turns` turns, ended, then the runtime closed."""
    runtime = Runtime.load(config)
    for i in range(turns):
        await runtime.turn(MESSAGES[i % len(MESSAGES)], peer="ada", thread=thread)
    await runtime.end_session(await runtime.session(peer="ada", thread=thread), "done")
    await runtime.aclose()


def figures(seen: list[tuple[str, str, dict[str, int]]], turns: int) -> dict[str, Any]:
    """Calls and tokens per turn of the requests seen."""
    return {
        "model_calls": len(seen),
        "calls_per_turn": round(len(seen) / turns, 3),
        "by_purpose": dict(Counter(kind for kind, _, _ in seen)),
        "by_model": dict(Counter(f"{kind}:{model}" for kind, model, _ in seen)),
        "prompt_tokens_per_turn": round(sum(u["prompt_tokens"] for _, _, u in seen) / turns, 1),
        "completion_tokens_per_turn": round(sum(u["completion_tokens"] for _, _, u in seen) / turns, 1),
        "derive_tokens_per_turn": round(sum(u["total_tokens"] for k, _, u in seen if k == "derive") / turns, 1),
    }


def measure(turns: int, sessions: int, identity: dict[str, Any]) -> dict[str, Any]:
    """Run one variant's sessions in a fresh home; per session, the server's requests by purpose and the tokens."""
    fake = FakeOpenAI()
    seen: list[tuple[str, str, dict[str, int]]] = []

    def reply(body: dict[str, Any]) -> str:
        text = answer(body)
        seen.append((purpose(body), str(body.get("model")), usage_of(body, text, [])))
        return text

    fake.replies = reply
    fake.start()
    out: dict[str, Any] = {"config": identity, "turns_per_session": turns}
    try:
        with tempfile.TemporaryDirectory() as folder:
            config = make_home(Path(folder) / "agent", fake, identity)
            saved = os.environ.get("THOTH_HOME")
            os.environ["THOTH_HOME"] = str(config.parent / ".thoth")
            try:
                for number in range(1, sessions + 1):
                    before = len(seen)
                    asyncio.run(session(config, turns, f"session-{number}"))
                    gc.collect()  # the SDK clients of the closed loop go now, not inside the next one
                    out[f"session_{number}"] = figures(seen[before:], turns)
            finally:
                os.environ.pop("THOTH_HOME") if saved is None else os.environ.__setitem__("THOTH_HOME", saved)
    finally:
        fake.stop()
    assert len(fake.completions) == len(seen), "every request the server received is counted once"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=2, help="sessions one after the other in the same home")
    args = parser.parse_args()
    variants: dict[str, dict[str, Any]] = {
        "before": {"derive_every": 1, "synthesis": True},  # the schedule and defaults before batching
        "after": {},  # the default config
        "after_with_synthesis": {"synthesis": True},
        "after_cheap_model": {"model": "openai", "model_options": {"model": "small-model"}},
    }
    result = {name: measure(args.turns, args.sessions, identity) for name, identity in variants.items()}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
