from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from thoth_core import hookimpl


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""


class TranscriptFiles:
    """The working layer's two transcript hooks over JSONL files the tests write in its layout."""

    def __init__(self, home: Path) -> None:
        self.root = home / "working" / "transcripts"

    @hookimpl
    def transcript_index(self):
        paths = sorted(self.root.glob("*/*.jsonl"))
        return [{"session_id": p.stem, "day": p.parent.name, "started_at": 0.0} for p in paths]

    @hookimpl
    def transcript(self, session_id):
        paths = sorted(self.root.glob(f"*/{session_id}.jsonl"))
        return [json.loads(line) for line in paths[-1].read_text().splitlines() if line.strip()] if paths else None


@pytest.fixture
def make_runtime(make_runtime, tmp_path, thoth_home):
    """The core's factory with the project root at the test's folder, where these tests look for persona/,
    `lead` as the home's owner (who decides approvals unless the test sets founders) and, without the
    working plugin, transcripts read from files in its layout (`TranscriptFiles`)."""

    def factory(plugins=None, **kwargs):
        kwargs.setdefault("root", tmp_path)
        config = kwargs.get("config") or {}
        kwargs["config"] = {**config, "thoth": {"owner": "lead", **config.get("thoth", {})}}  # lead owns these homes
        if plugins is not None and "working" not in plugins:
            plugins = {**plugins, "transcripts": TranscriptFiles(thoth_home)}
        return make_runtime(plugins, **kwargs)

    return factory


GOOD = {
    "what_worked": ["Asking which environment first saved a round trip."],
    "what_didnt": ["The first answer was too long."],
    "skill": {
        "name": "deploy-staging",
        "description": "Deploy the app to staging.",
        "body": "1. Build.\n2. Push the image.\n3. Roll out.",
    },
    "memory_notes": [
        "Ann deploys to staging every Friday.",
        "Ann's staging token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + ".",
    ],
    "persona_observations": ["Lead with the command, then explain."],
    # a week after the tests run: a check-in the reflection schedules is never due during a test
    "next_check_at": (datetime.now(UTC) + timedelta(days=7)).strftime("%Y-%m-%dT09:00:00Z"),
    "user_model_updates": {"ann": ["Prefers terse answers."]},
}


class FakeProcedural:
    """An in-test procedural layer following the contract: drafts, approval items, discoverable once approved."""

    LAYER = "procedural"

    def __init__(self):
        self.drafts, self.skills = {}, {}

    @hookimpl
    def reflection_result(self, result, session):
        skill = result.get("skill")
        if skill:
            self.drafts[skill["name"]] = dict(
                skill, session=session.id, run=result["run_id"], flags=result["flags"].get("skill", [])
            )
            session.runtime.notify(
                "approval_requested", item_id=f"skill:{skill['name']}", text=f"new skill draft {skill['name']}"
            )

    @hookimpl
    def approvals(self):
        return [
            {
                "id": f"skill:{n}",
                "kind": "skill",
                "title": n,
                "body": d["body"],
                "workspace": None,
                "peer": None,
                "source": {"session": d["session"]},
                "flags": d["flags"],
                "created_at": 0,
            }
            for n, d in self.drafts.items()
        ]

    @hookimpl
    def decide(self, item_id, decision, actor):
        kind, _, slug = item_id.partition(":")
        if kind != "skill" or slug not in self.drafts:
            return None
        draft = self.drafts.pop(slug)
        if decision == "approve":
            self.skills[slug] = draft
        return {"id": item_id, "status": decision, "message": f"{decision} {slug}"}


class FakeIdentity:
    """An in-test identity layer: records user-model updates."""

    LAYER = "identity"

    def __init__(self):
        self.updates = []
        self.failure = None  # set: the layer raises it instead of taking updates

    @hookimpl
    def reflection_result(self, result, session):
        if self.failure:
            raise RuntimeError(self.failure)
        for peer, items in result["user_model_updates"].items():
            self.updates += [(peer, text) for text in items]


class Notices:
    """An in-test frontend: records notifications."""

    def __init__(self):
        self.events = []

    @hookimpl
    def notify(self, event, payload):
        self.events.append((event, payload))


@pytest.fixture
def reflecting(make_runtime):
    """Factory: a runtime with reflection, fake procedural/identity layers and a notice recorder."""
    import json

    from thoth_reflection import plugin as reflection

    def factory(outputs=None, *, config=None, extra=None):
        fakes = {"procedural": FakeProcedural(), "identity": FakeIdentity(), "notices": Notices()}
        rules = [{"purpose": "reflection", "reply": json.dumps(GOOD) if outputs is None else outputs[0]}]
        if outputs and len(outputs) > 1:
            rules.append({"purpose": "reflection-repair", "reply": outputs[1]})
        rules.append({"reply": "Sure."})
        runtime = make_runtime({"reflection": reflection, **fakes, **(extra or {})}, replies=rules, config=config)
        return runtime, fakes

    return factory


async def chat_and_end(runtime, *texts, peer="ann", thread="t1"):
    """Run turns, end the session with /done and wait for reflection."""
    for text in texts:
        await runtime.turn(text, peer=peer, thread=thread)
    result = await runtime.turn("/done", peer=peer, thread=thread)
    await runtime.drain()
    return result.session


@pytest.fixture
def chat():
    return chat_and_end


@pytest.fixture
def good():
    import copy

    return copy.deepcopy(GOOD)


@pytest.fixture
def fakes():
    """The in-test layer classes, for tests that assemble their own runtime."""
    return {"procedural": FakeProcedural, "identity": FakeIdentity, "notices": Notices}
