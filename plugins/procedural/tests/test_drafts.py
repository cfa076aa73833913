"""The approval workflow: drafts from reflection, approve (git commit) and reject (archive), audit, founders, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import skills_ref
from thoth_procedural import drafts, plugin

from thoth_core import ThothError, hookimpl
from thoth_core._calls import call_each
from thoth_core.config import load_config
from thoth_core.runtime import Runtime
from thoth_core.testing import context_for, run_thoth

RESULT = {
    "run_id": "run-7",
    "session_id": "sess-1",
    "what_worked": ["checking the log first"],
    "what_didnt": [],
    "skill": {
        "name": "triage-deploy",
        "description": "Triage a failed deploy: read the log, find the first error, roll back if needed.",
        "body": "# Triage a failed deploy\n\n1. Open the deploy log.\n2. Find the first error.\n"
        "3. Roll back when unsure.\n",
    },
    "memory_notes": [],
    "persona_observations": [],
    "next_check_at": None,
    "user_model_updates": {},
    "flags": {"skill": []},
}


class Notifications:
    def __init__(self):
        self.events = []

    @hookimpl
    async def notify(self, event, payload):
        self.events.append((event, payload))


def git(root, *args):
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repository(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "README.md").write_text("project\n")
    git(tmp_path, "add", "README.md")
    git(tmp_path, "-c", "user.name=T", "-c", "user.email=t@example.org", "commit", "-q", "-m", "start")
    return tmp_path


async def reflect(runtime, result=RESULT):
    session = await runtime.session(peer="ann", thread="t")
    outcomes = await call_each(runtime.pm, "reflection_result", {"result": result, "session": session})
    await runtime.drain()
    assert [c.status for _, _, c in outcomes] == ["ok"], outcomes


async def test_reflection_result_writes_a_pending_draft_and_asks_for_approval(runtime_at, tmp_path):
    notes = Notifications()
    runtime = runtime_at({"notes": notes})
    await reflect(runtime)
    folder = tmp_path / ".claude" / "skill-drafts" / "triage-deploy"
    assert sorted(p.name for p in folder.iterdir()) == ["SKILL.md", "draft.json", "manifest.json", "src"]
    meta = json.loads((folder / "draft.json").read_text())
    assert (
        meta["source"]
        == {"session_id": "sess-1", "run_id": "run-7", "workspace": "default", "peer": "ann", "thread": "t"}
        and meta["flags"] == []
        and meta["created_at"].endswith("+00:00")
    )
    assert json.loads((folder / "manifest.json").read_text()) == {
        "name": "triage-deploy",
        "version": "0.1.0",
        "author": "Thoth reflection",
        "license": "Apache-2.0",
        "tools_allowed": [],
    }
    [(event, payload)] = notes.events
    assert event == "approval_requested" and payload["item_id"] == "skill:triage-deploy" and payload["peer"] == "ann"
    assert "/approve skill:triage-deploy" in payload["text"]
    context = await context_for(runtime, "hi", peer="ann", thread="t2")
    assert "triage-deploy" not in context.system  # discovery ignores the pending area
    [item] = await runtime.approvals()
    assert (item["id"], item["kind"], item["flags"]) == ("skill:triage-deploy", "skill", [])
    assert item["source"]["run_id"] == "run-7" and "Find the first error." in item["body"]
    assert [e["action"] for e in drafts.read_audit(runtime)] == ["draft"]


async def test_flagged_skills_are_drafted_with_their_flags_and_a_warning(runtime_at):
    notes = Notifications()
    runtime = runtime_at({"notes": notes})
    await reflect(runtime, RESULT | {"flags": {"skill": ["injection"]}})
    [item] = await runtime.approvals()
    assert item["flags"] == ["injection"]
    assert "FLAGGED (injection)" in notes.events[0][1]["text"] and notes.events[0][1]["flags"] == ["injection"]


async def test_no_skill_means_no_draft(runtime_at, tmp_path):
    runtime = runtime_at()
    await reflect(runtime, RESULT | {"skill": None})
    assert await runtime.approvals() == [] and not (tmp_path / ".claude" / "skill-drafts").exists()


async def test_approve_installs_commits_only_the_skill_and_audits(runtime_at, repository):
    runtime = runtime_at()
    await reflect(runtime)
    (repository / "someone-elses.txt").write_text("staged by another engineer\n")
    git(repository, "add", "someone-elses.txt")
    outcome = await runtime.decide("skill:triage-deploy", "approve", actor="ann")
    installed = repository / ".claude" / "skills" / "triage-deploy"
    assert outcome["path"] == str(installed) and "committed" in outcome["message"]
    assert sorted(p.name for p in installed.iterdir()) == ["SKILL.md", "manifest.json", "src"]
    assert not (repository / ".claude" / "skill-drafts" / "triage-deploy").exists()
    assert git(repository, "rev-parse", "HEAD") == outcome["commit"]
    assert git(repository, "log", "-1", "--format=%s") == "Approve skill triage-deploy (by ann)"
    committed = git(repository, "show", "--name-only", "--format=", "HEAD").splitlines()
    assert sorted(committed) == [
        ".claude/skills/triage-deploy/SKILL.md",
        ".claude/skills/triage-deploy/manifest.json",
        ".claude/skills/triage-deploy/src/.gitkeep",
    ]
    assert git(repository, "diff", "--cached", "--name-only") == "someone-elses.txt"
    [drafted, approved] = drafts.read_audit(runtime)
    assert (approved["action"], approved["item_id"], approved["actor"], approved["commit"]) == (
        "approve",
        "skill:triage-deploy",
        "ann",
        outcome["commit"],
    )
    assert await runtime.approvals() == []
    context = await context_for(runtime, "hi", peer="ann", thread="new")
    assert "- triage-deploy: Triage a failed deploy" in [b for b in context.blocks if b.tag == "skills"][0].text


async def test_approved_skills_pass_the_reference_validator(runtime_at, tmp_path):
    runtime = runtime_at()
    tricky = RESULT["skill"] | {
        "description": 'Use when: "deploy" fails; yes: it #works\nacross lines',
        "name": "tricky-quoting",
    }
    await reflect(runtime, RESULT | {"skill": tricky})
    await reflect(runtime)
    for slug in ("tricky-quoting", "triage-deploy"):
        path = drafts.approve(runtime, slug, actor="ann")
        assert skills_ref.validate(path) == []
        assert skills_ref.read_properties(path).name == slug
        checked = subprocess.run(
            [str(Path(sys.executable).with_name("agentskills")), "validate", str(path)], capture_output=True, text=True
        )
        assert checked.returncode == 0 and "Valid skill" in checked.stdout, checked.stdout + checked.stderr
    assert (
        skills_ref.read_properties(tmp_path / ".claude" / "skills" / "tricky-quoting").description
        == 'Use when: "deploy" fails; yes: it #works across lines'
    )


async def test_approve_without_a_repository_still_installs(runtime_at, tmp_path):
    runtime = runtime_at()
    await reflect(runtime)
    outcome = await runtime.decide("skill:triage-deploy", "approve", actor="ann")
    assert outcome["commit"] is None and "not committed" in outcome["message"]
    assert (tmp_path / ".claude" / "skills" / "triage-deploy" / "SKILL.md").is_file()


async def test_approving_again_replaces_the_installed_skill(runtime_at, repository):
    runtime = runtime_at()
    await reflect(runtime)
    drafts.approve(runtime, "triage-deploy", actor="ann")
    await reflect(runtime, RESULT | {"skill": RESULT["skill"] | {"body": "Version two."}})
    drafts.approve(runtime, "triage-deploy", actor="ann")
    installed = repository / ".claude" / "skills" / "triage-deploy"
    assert "Version two." in (installed / "SKILL.md").read_text()
    assert not [p for p in (repository / ".claude" / "skills").iterdir() if p.name.startswith(".")]
    assert int(git(repository, "rev-list", "--count", "HEAD")) == 3
    assert drafts.read_audit(runtime)[-1]["replaced"] is True


async def test_reject_archives_with_the_reason_and_audits(runtime_at, tmp_path):
    runtime = runtime_at()
    await reflect(runtime)
    outcome = await runtime.decide("skill:triage-deploy", "reject", actor="ann", reason="too specific to one incident")
    archive = Path(outcome["path"])
    assert archive.parent == tmp_path / ".claude" / "skill-drafts" / ".rejected" and archive.name.startswith(
        "triage-deploy-"
    )
    rejection = json.loads((archive / "rejection.json").read_text())
    assert (rejection["actor"], rejection["reason"]) == ("ann", "too specific to one incident")
    assert (archive / "SKILL.md").is_file() and (archive / "draft.json").is_file()
    assert await runtime.approvals() == [] and not (tmp_path / ".claude" / "skills" / "triage-deploy").exists()
    last = drafts.read_audit(runtime)[-1]
    assert (last["action"], last["actor"], last["reason"], last["path"]) == (
        "reject",
        "ann",
        "too specific to one incident",
        str(archive),
    )


async def test_edit_replaces_the_instructions_and_keeps_it_pending(runtime_at):
    runtime = runtime_at()
    await reflect(runtime)
    await runtime.decide(
        "skill:triage-deploy", "edit", actor="ann", text="1. Read the log.\n2. Ask before rolling back."
    )
    [item] = await runtime.approvals()
    assert "Ask before rolling back." in item["body"] and "Find the first error." not in item["body"]
    assert item["source"]["run_id"] == "run-7"
    assert drafts.read_audit(runtime)[-1]["action"] == "edit"


async def test_only_founders_may_decide(runtime_at, tmp_path):
    runtime = runtime_at(config={"thoth": {"founders": ["ann"]}})
    await reflect(runtime)
    with pytest.raises(ThothError, match="'mallory' may not decide skill:triage-deploy: only founders may \\(ann\\)"):
        await runtime.decide("skill:triage-deploy", "approve", actor="mallory")
    with pytest.raises(ThothError, match="may not decide"):
        drafts.reject(runtime, "triage-deploy", actor="mallory", reason="no")
    assert [e["action"] for e in drafts.read_audit(runtime)] == ["draft"]
    assert (await runtime.decide("skill:triage-deploy", "approve", actor="ann"))["item_id"] == "skill:triage-deploy"


async def test_decide_leaves_other_kinds_alone_and_names_unknown_drafts(runtime_at):
    runtime = runtime_at()
    assert (
        plugin.decide(item_id="persona:3", decision="approve", actor="ann", reason="", text=None, runtime=runtime)
        is None
    )
    with pytest.raises(ThothError, match="no pending item 'persona:3'"):
        await runtime.decide("persona:3", "approve", actor="ann")
    with pytest.raises(ThothError, match="no pending skill draft 'ghost'"):
        await runtime.decide("skill:ghost", "approve", actor="ann")
    await reflect(runtime)
    with pytest.raises(ThothError, match="unknown decision 'maybe'"):
        await runtime.decide("skill:triage-deploy", "maybe", actor="ann")


async def test_slash_approve_and_reject_from_a_frontend(runtime_at):
    runtime = runtime_at()
    await reflect(runtime)
    listing = (await runtime.turn("/approvals", peer="ann", thread="t")).reply.text
    assert "skill:triage-deploy  [skill] skill triage-deploy: Triage a failed deploy" in listing
    assert "pending approval: skill:triage-deploy" in (await runtime.turn("/skills", peer="ann", thread="t")).reply.text
    reply = (await runtime.turn("/approve skill:triage-deploy", peer="ann", thread="t")).reply.text
    assert reply.startswith("approved skill triage-deploy: installed in")


def test_cli_list_show_approve_reject(tmp_path, thoth_home, repository):
    (tmp_path / "thoth.toml").write_text('[thoth]\nfounders = ["ann"]\n')
    env = {"THOTH_HOME": str(thoth_home), "THOTH_LOAD_PLUGINS": "procedural", "THOTH_CONFIG": None}
    runtime = Runtime(load_config(tmp_path / "thoth.toml"), autoload=False, home=thoth_home)
    for name in ("triage-deploy", "write-notes"):
        drafts.write_draft(
            runtime,
            name=name,
            description=f"About {name}.",
            body="Steps.",
            source={"run_id": "r"},
            flags=["injection"] if name == "write-notes" else [],
        )

    listed = run_thoth("skills", "list", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "triage-deploy" in listed.stdout and "write-notes" in listed.stdout and "FLAGGED: injection" in listed.stdout
    shown = run_thoth("skills", "show", "triage-deploy", cwd=tmp_path, env=env)
    assert shown.stdout.startswith("---\nname: triage-deploy\n") and "pending draft" in shown.stderr
    denied = run_thoth("skills", "approve", "triage-deploy", "--actor", "mallory", cwd=tmp_path, env=env)
    assert denied.returncode == 2 and "thoth: error: 'mallory' may not decide skill:triage-deploy" in denied.stderr
    approved = run_thoth("skills", "approve", "triage-deploy", "--actor", "ann", cwd=tmp_path, env=env)
    assert (
        approved.returncode == 0
        and "approved skill triage-deploy" in approved.stdout
        and "committed" in approved.stdout
    )
    rejected = run_thoth(
        "skills", "reject", "write-notes", "--reason", "duplicate", "--actor", "ann", cwd=tmp_path, env=env
    )
    assert rejected.returncode == 0 and "archived in" in rejected.stdout
    traversal = run_thoth("skills", "show", "../../etc", cwd=tmp_path, env=env)
    assert traversal.returncode == 2 and "invalid skill name '../../etc'" in traversal.stderr
    listed = run_thoth("skills", "list", "--json", cwd=tmp_path, env=env)
    assert json.loads(listed.stdout)["drafts"] == [] and [s["slug"] for s in json.loads(listed.stdout)["skills"]] == [
        "triage-deploy"
    ]
    assert [(e["action"], e["slug"]) for e in drafts.read_audit(runtime)][-2:] == [
        ("approve", "triage-deploy"),
        ("reject", "write-notes"),
    ]
