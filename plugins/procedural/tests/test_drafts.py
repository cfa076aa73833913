"""The approval workflow: drafts from reflection (one per proposing peer), approve (git commit) and reject (archive),
audit, the approvals policy, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import skills_ref
from thoth_procedural import drafts, plugin
from thoth_procedural.settings import Settings

from thoth_core import ThothError, hookimpl
from thoth_core._calls import call_each
from thoth_core.config import load_config
from thoth_core.runtime import Runtime
from thoth_core.testing import context_for, run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

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


ANN = {"workspace": "default", "peer": "ann"}
KEY = drafts.draft_key("triage-deploy", ANN)  # ann's draft of triage-deploy: `triage-deploy--<hash>`
ITEM = f"skill:{KEY}"


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
    folder = tmp_path / ".claude" / "skill-drafts" / KEY
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
    assert event == "approval_requested" and payload["item_id"] == ITEM and payload["peer"] == "ann"
    assert f"/approve {ITEM}" in payload["text"]
    context = await context_for(runtime, "hi", peer="ann", thread="t2")
    assert "triage-deploy" not in context.system  # discovery ignores the pending area
    [item] = await runtime.approvals(actor="ann")
    assert (item["id"], item["kind"], item["flags"]) == (ITEM, "skill", [])
    assert item["source"]["run_id"] == "run-7" and "Find the first error." in item["body"]
    assert [e["action"] for e in drafts.read_audit(runtime)] == ["draft"]


async def test_flagged_skills_are_drafted_with_their_flags_and_a_warning(runtime_at):
    notes = Notifications()
    runtime = runtime_at({"notes": notes})
    await reflect(runtime, RESULT | {"flags": {"skill": ["injection"]}})
    [item] = await runtime.approvals(actor="ann")
    assert item["flags"] == ["injection"]
    assert "FLAGGED (injection)" in notes.events[0][1]["text"] and notes.events[0][1]["flags"] == ["injection"]


async def test_no_skill_means_no_draft(runtime_at, tmp_path):
    runtime = runtime_at()
    await reflect(runtime, RESULT | {"skill": None})
    assert await runtime.approvals(actor="ann") == [] and not (tmp_path / ".claude" / "skill-drafts").exists()


async def test_approve_installs_commits_only_the_skill_and_audits(runtime_at, repository):
    runtime = runtime_at()
    await reflect(runtime)
    (repository / "someone-elses.txt").write_text("staged by another engineer\n")
    git(repository, "add", "someone-elses.txt")
    outcome = await runtime.decide(ITEM, "approve", actor="ann")
    installed = repository / ".claude" / "skills" / "triage-deploy"
    assert outcome["path"] == str(installed) and "committed" in outcome["message"]
    assert sorted(p.name for p in installed.iterdir()) == ["SKILL.md", "manifest.json", "src"]
    assert not (repository / ".claude" / "skill-drafts" / KEY).exists()
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
        ITEM,
        "ann",
        outcome["commit"],
    )
    assert await runtime.approvals(actor="ann") == []
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
        path = drafts.approve(runtime, drafts.draft_key(slug, ANN), actor="ann")
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
    outcome = await runtime.decide(ITEM, "approve", actor="ann")
    assert outcome["commit"] is None and "not committed" in outcome["message"]
    assert (tmp_path / ".claude" / "skills" / "triage-deploy" / "SKILL.md").is_file()


async def test_approving_again_replaces_the_installed_skill(runtime_at, repository):
    runtime = runtime_at()
    await reflect(runtime)
    drafts.approve(runtime, KEY, actor="ann")
    await reflect(runtime, RESULT | {"skill": RESULT["skill"] | {"body": "Version two."}})
    drafts.approve(runtime, KEY, actor="ann")
    installed = repository / ".claude" / "skills" / "triage-deploy"
    assert "Version two." in (installed / "SKILL.md").read_text()
    assert not [p for p in (repository / ".claude" / "skills").iterdir() if p.name.startswith(".")]
    assert int(git(repository, "rev-list", "--count", "HEAD")) == 3
    assert drafts.read_audit(runtime)[-1]["replaced"] is True


async def test_reject_archives_with_the_reason_and_audits(runtime_at, tmp_path):
    runtime = runtime_at()
    await reflect(runtime)
    outcome = await runtime.decide(ITEM, "reject", actor="ann", reason="too specific to one incident")
    archive = Path(outcome["path"])
    assert archive.parent == tmp_path / ".claude" / "skill-drafts" / ".rejected" and archive.name.startswith(f"{KEY}-")
    rejection = json.loads((archive / "rejection.json").read_text())
    assert (rejection["actor"], rejection["reason"]) == ("ann", "too specific to one incident")
    assert (archive / "SKILL.md").is_file() and (archive / "draft.json").is_file()
    assert (
        await runtime.approvals(actor="ann") == [] and not (tmp_path / ".claude" / "skills" / "triage-deploy").exists()
    )
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
    await runtime.decide(ITEM, "edit", actor="ann", text="1. Read the log.\n2. Ask before rolling back.")
    [item] = await runtime.approvals(actor="ann")
    assert "Ask before rolling back." in item["body"] and "Find the first error." not in item["body"]
    assert item["source"]["run_id"] == "run-7"
    assert drafts.read_audit(runtime)[-1]["action"] == "edit"


async def test_only_founders_may_decide(runtime_at, tmp_path):
    runtime = runtime_at(config={"thoth": {"founders": ["lead"]}})
    await reflect(runtime)
    with pytest.raises(ThothError, match=f"mallory may not approve {ITEM}: it is not about you; only founders decide"):
        await runtime.decide(ITEM, "approve", actor="mallory")
    with pytest.raises(ThothError, match=f"ann may not approve {ITEM}: you may only withdraw"):  # ann's own draft
        await runtime.decide(ITEM, "approve", actor="ann")
    assert [e["action"] for e in drafts.read_audit(runtime)] == ["draft"]
    assert (await runtime.decide(ITEM, "approve", actor="lead"))["item_id"] == ITEM


async def test_decide_leaves_other_kinds_alone_and_names_unknown_drafts(runtime_at):
    runtime = runtime_at()
    assert (
        plugin.decide(item_id="persona:3", decision="approve", actor="ann", reason="", text=None, runtime=runtime)
        is None
    )
    with pytest.raises(ThothError, match="no pending item 'persona:3'"):
        await runtime.decide("persona:3", "approve", actor="ann")
    with pytest.raises(ThothError, match="no pending item 'skill:ghost'"):
        await runtime.decide("skill:ghost", "approve", actor="ann")
    await reflect(runtime)
    with pytest.raises(ThothError, match="unknown decision 'maybe'"):
        await runtime.decide(ITEM, "maybe", actor="ann")


async def test_slash_approve_and_reject_from_a_frontend(runtime_at):
    runtime = runtime_at()
    await reflect(runtime)
    listing = (await runtime.turn("/approvals", peer="ann", thread="t")).reply.text
    assert f"{ITEM}  [skill] skill triage-deploy: Triage a failed deploy" in listing and "(from ann)" in listing
    assert f"pending approval: {ITEM}" in (await runtime.turn("/skills", peer="ann", thread="t")).reply.text
    assert "pending approval" not in (await runtime.turn("/skills", peer="eve", thread="t")).reply.text
    reply = (await runtime.turn(f"/approve {ITEM}", peer="ann", thread="t")).reply.text
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

    listed = run_thoth("skills", "list", "--actor", "ann", cwd=tmp_path, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "triage-deploy" in listed.stdout and "write-notes" in listed.stdout and "FLAGGED: injection" in listed.stdout
    hidden = run_thoth("skills", "list", "--actor", "mallory", cwd=tmp_path, env=env)
    assert hidden.returncode == 0 and "triage-deploy" not in hidden.stdout  # drafts from no one's session: deciders
    shown = run_thoth("skills", "show", "triage-deploy", "--actor", "ann", cwd=tmp_path, env=env)
    assert shown.stdout.startswith("---\nname: triage-deploy\n") and "pending draft" in shown.stderr
    unseen = run_thoth("skills", "show", "triage-deploy", "--actor", "mallory", cwd=tmp_path, env=env)
    assert unseen.returncode == 2 and "no skill or draft 'triage-deploy' that mallory may see" in unseen.stderr
    denied = run_thoth("skills", "approve", "triage-deploy", "--actor", "mallory", cwd=tmp_path, env=env)
    assert denied.returncode == 2 and "thoth: error: mallory may not approve skill:triage-deploy" in denied.stderr
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
    listed = run_thoth("skills", "list", "--json", "--actor", "ann", cwd=tmp_path, env=env)
    assert json.loads(listed.stdout)["drafts"] == [] and [s["slug"] for s in json.loads(listed.stdout)["skills"]] == [
        "triage-deploy"
    ]
    assert [(e["action"], e["slug"]) for e in drafts.read_audit(runtime)][-2:] == [
        ("approve", "triage-deploy"),
        ("reject", "write-notes"),
    ]


def drafted(runtime, peer, *, name="deploy-billing", body="Steps."):
    source = {"workspace": "default", "peer": peer, "thread": "t", "session_id": f"s-{peer}"}
    return drafts.write_draft(runtime, name=name, description="Deploy billing.", body=body, source=source, flags=[])


async def test_two_peers_proposing_one_skill_get_a_draft_each_and_forget_keeps_the_other(runtime_at, tmp_path):
    """Issue 36 item 2: zed's draft overwrote ann's, and forgetting zed removed ann's draft and blanked ann's audit."""
    runtime = runtime_at()
    ann, zed = drafted(runtime, "ann", body="Ann's steps."), drafted(runtime, "zed", body="Zed's steps.")
    assert ann != zed and ann.name.startswith("deploy-billing--") and zed.name.startswith("deploy-billing--")
    assert "Ann's steps." in (ann / "SKILL.md").read_text() and "Zed's steps." in (zed / "SKILL.md").read_text()
    items = {i["peer"]: i for i in await runtime.approvals(actor="ann")}
    assert items["ann"]["id"] == f"skill:{ann.name}" and items["zed"]["title"].endswith("(from zed)")
    assert drafted(runtime, "ann", body="Ann's second try.") == ann  # the same peer's later draft replaces theirs
    await runtime.decide(f"skill:{ann.name}", "edit", actor="ann", text="Ann's edit.")
    anns = [e for e in drafts.read_audit(runtime) if e["key"] == ann.name]

    receipt = drafts.forget(runtime, peer="zed", workspace="default", thread=None)

    assert receipt == {"skill drafts": 1, "audit entries blanked": 1, "approved files to edit": 0}
    assert ann.is_dir() and not zed.exists()
    assert [e for e in drafts.read_audit(runtime) if e.get("key") == ann.name] == anns
    assert "zed" not in json.dumps(drafts.read_audit(runtime))


def test_an_old_audit_entry_two_owners_share_is_not_blanked_for_either(runtime_at):
    """Entries written before drafts had keys name only the slug: a decision on one of them may be another's."""
    runtime = runtime_at()
    settings = Settings.of(runtime)
    settings.audit.parent.mkdir(parents=True, exist_ok=True)
    old = [
        {"action": "draft", "slug": "deploy-billing", "source": {"workspace": "default", "peer": "ann"}},
        {"action": "draft", "slug": "deploy-billing", "source": {"workspace": "default", "peer": "zed"}},
        {"action": "approve", "slug": "deploy-billing", "actor": "lead"},
    ]
    settings.audit.write_text("".join(json.dumps(e) + "\n" for e in old))
    receipt = drafts.forget(runtime, peer="zed", workspace="default", thread=None)
    assert receipt["audit entries blanked"] == 1
    entries = drafts.read_audit(runtime)
    assert entries[0] == old[0] and entries[2] == old[2] and entries[1].get("forgotten") is True


async def test_a_slug_names_a_draft_only_when_one_peer_has_it(runtime_at):
    runtime = runtime_at()
    ann = drafted(runtime, "ann")
    assert drafts.resolve_key(runtime, "deploy-billing") == ann.name
    drafted(runtime, "zed")
    with pytest.raises(ThothError, match="several pending drafts of skill 'deploy-billing': deploy-billing--"):
        drafts.resolve_key(runtime, "deploy-billing")
    with pytest.raises(ThothError, match="invalid skill draft key 'deploy-billing--zz'"):
        drafts.resolve_key(runtime, "deploy-billing--zz")
