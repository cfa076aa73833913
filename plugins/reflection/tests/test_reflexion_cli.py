"""Reflexion across processes, with the real `thoth` script: a failed `thoth ask`, then the next one."""

from __future__ import annotations

import json

import pytest

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

RECORD = {
    "slug": "provider-overloaded",
    "task": "Answer a chat turn",
    "severity": "medium",
    "tags": ["overloaded", "529", "anthropic"],
    "known_issue": "The Anthropic API answered 529 overloaded_error and the turn failed.",
    "root_cause": "The provider was saturated.",
    "solution": "Answer briefly and suggest trying again in a minute.",
    "prevention": "Keep interactive turns short when the provider is busy.",
}
KNOWN = """---
date: 2026-01-20
task: answer a turn
tags: overloaded 529
---

## Known Issue
The provider answered 529 overloaded.

## Solution
Say the model was busy and keep the answer short.
"""


@pytest.fixture
def project(tmp_path, thoth_home, fake_anthropic):
    pytest.importorskip("thoth_working", reason="a resumed session's transcript comes from the working layer")
    pytest.importorskip("thoth_procedural", reason="the procedural layer offers reflexion records")
    (tmp_path / "replay.json").write_text(json.dumps([{"purpose": "reflexion", "reply": json.dumps(RECORD)}]))
    (tmp_path / "reflexion").mkdir()
    (tmp_path / "reflexion" / "2026-01-20-busy.md").write_text(KNOWN)
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "anthropic"\nfounders = ["lead"]\n\n[models.replay]\nfile = "replay.json"\n\n'
        '[plugins.reflection]\nmodel = "replay"\n'
    )
    env = {
        "THOTH_CONFIG": str(tmp_path / "thoth.toml"),
        "THOTH_HOME": str(thoth_home),
        "THOTH_LOAD_PLUGINS": "reflection,working,procedural,anthropic",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": "test-key",
    }
    return env


def thoth(env, *args, ok=True):
    done = run_thoth(*args, env=env)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def test_a_failed_ask_gets_known_issues_and_a_draft_in_the_next_process(project, fake_anthropic, tmp_path):
    fake_anthropic.fail_with(529)
    failed = thoth(project, "ask", "summarise the release notes", "--peer", "ann", ok=False)
    assert failed.returncode != 0 and "overloaded" in failed.stderr.lower()
    fake_anthropic.recover()
    fake_anthropic.replies = ["Here is a short summary."]
    thoth(project, "ask", "please try once more", "--peer", "ann")
    system = json.dumps(fake_anthropic.messages_requests[-1].body["system"])
    assert "The last attempt failed" in system and "Say the model was busy" in system

    queued = json.loads(thoth(project, "review", "--json", "--actor", "lead").stdout)
    [item] = [i for i in queued if i["kind"] == "reflexion"]
    assert item["source"]["peer"] == "ann" and "provider-overloaded.md" in item["title"]
    approved = thoth(project, "review", "approve", item["id"], "--actor", "lead").stdout
    [path] = list((tmp_path / "reflexion").glob("*-provider-overloaded.md"))
    assert path.name in approved and "## Prevention\nKeep interactive turns short" in path.read_text()

    promoted = thoth(project, "reflect", "promote", path.stem, "--actor", "lead").stdout
    guideline = promoted.split("queued ")[1].split(";")[0]
    assert guideline.startswith("guideline:")
    thoth(project, "review", "approve", guideline, "--actor", "lead")
    rules = (tmp_path / "persona" / "RULES.md").read_text()
    assert "- When the Anthropic API answered 529 overloaded_error" in rules
    assert "promoted_to: persona/RULES.md" in path.read_text()
    missing = thoth(project, "reflect", "promote", "nope", ok=False)
    assert missing.returncode == 2 and "no record 'nope'" in missing.stderr
