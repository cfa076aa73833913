"""Forget reaches governed items: queue items of any status, their audit rows, skill drafts and
text of the peer in approved files (removed when a line is the peer's alone, else listed)."""

from __future__ import annotations

import json
import logging
import secrets
from pathlib import Path

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection import queue
from thoth_reflection.reflect import records
from thoth_reflection.settings import state


def marker() -> str:
    return f"zqxmarker{secrets.token_hex(6)}7"


def holders(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()
    )


@pytest.fixture
def procedural():
    return pytest.importorskip("thoth_procedural.plugin")


def drafts_of(root: Path, slug: str) -> list[Path]:
    """The pending drafts of a skill, one per proposing peer (`<slug>--<owner hash>`)."""
    return sorted((root / ".claude" / "skill-drafts").glob(f"{slug}--*"))


async def test_forget_deletes_the_peers_decided_items_audit_rows_and_drafts(
    make_runtime, procedural, good, chat, tmp_path, caplog
):
    secret = marker()
    reply = dict(
        good,
        memory_notes=[],
        user_model_updates={},
        persona_observations=[f"Ann calls the project {secret}; mirror that name."],
        skill={"name": "deploy-staging", "description": f"Deploy {secret} to staging.", "body": f"1. Build {secret}."},
    )
    rules = [{"purpose": "reflection", "reply": json.dumps(reply)}, {"reply": "Sure."}]
    runtime = make_runtime({"reflection": reflection, "procedural": procedural}, replies=rules, root=tmp_path)
    await chat(runtime, f"Our project is {secret}.", peer="ann")
    st = state(runtime)
    [record] = [r for r in records(st).all() if r.kind == "reflection"]
    pending = queue.propose_promotion(
        st, record_id=record.id, topic="deploys", text=f"Build {secret} first.", actor="lead"
    )
    approved = queue.propose_promotion(
        st, record_id=record.id, topic="deploys", text=f"Then ship {secret}.", actor="lead"
    )
    await runtime.decide(approved, "approve", actor="lead")
    knowledge = tmp_path / "knowledge" / "deploys.md"
    assert secret in knowledge.read_text() and len(drafts_of(tmp_path, "deploy-staging")) == 1

    with caplog.at_level(logging.WARNING):
        receipt = await runtime.forget(peer="ann")

    assert st.store.item(pending) is None and st.store.item(approved) is None
    assert not any(secret in json.dumps(e["payload"]) for e in st.store.audit_log())
    assert drafts_of(tmp_path, "deploy-staging") == []
    assert receipt["procedural"]["skill drafts"] == 1
    # the approved knowledge note is the humans' file: listed with file and line, not edited
    assert secret in knowledge.read_text()
    line = next(n for n, text in enumerate(knowledge.read_text().splitlines(), 1) if secret in text)
    assert receipt["reflection"]["approved files to edit"] == 1
    assert f"knowledge/deploys.md:{line}" in caplog.text
    assert holders(tmp_path, secret) == ["knowledge/deploys.md"]


async def test_forget_lists_the_installed_skill_and_blanks_its_procedural_audit(
    make_runtime, procedural, good, chat, tmp_path, caplog
):
    secret = marker()
    reply = dict(
        good,
        memory_notes=[],
        user_model_updates={},
        persona_observations=[],
        skill={"name": "deploy-staging", "description": f"Deploy {secret}.", "body": f"1. Build {secret}."},
    )
    rules = [{"purpose": "reflection", "reply": json.dumps(reply)}, {"reply": "Sure."}]
    runtime = make_runtime({"reflection": reflection, "procedural": procedural}, replies=rules, root=tmp_path)
    await chat(runtime, f"Our project is {secret}.", peer="ann")
    [draft] = drafts_of(tmp_path, "deploy-staging")
    await runtime.decide(f"skill:{draft.name}", "approve", actor="lead")
    installed = tmp_path / ".claude" / "skills" / "deploy-staging" / "SKILL.md"
    assert secret in installed.read_text()

    with caplog.at_level(logging.WARNING):
        receipt = await runtime.forget(peer="ann")

    assert receipt["procedural"]["approved files to edit"] == 1
    assert ".claude/skills/deploy-staging/SKILL.md:" in caplog.text
    audit = (Path(runtime.home) / "procedural" / "audit.jsonl").read_text()
    assert "deploy-staging" not in audit and "ann" not in audit
    assert installed.exists()


async def test_forget_of_another_peer_leaves_anns_items(make_runtime, procedural, good, chat, tmp_path):
    rules = [{"purpose": "reflection", "reply": json.dumps(good)}, {"reply": "Sure."}]
    runtime = make_runtime({"reflection": reflection, "procedural": procedural}, replies=rules, root=tmp_path)
    await chat(runtime, "hello", peer="ann")
    st = state(runtime)
    [record] = [r for r in records(st).all() if r.kind == "reflection"]
    item = queue.propose_promotion(st, record_id=record.id, topic="deploys", text="Keep it.", actor="lead")
    receipt = await runtime.forget(peer="bob")
    assert st.store.item(item) is not None and len(drafts_of(tmp_path, "deploy-staging")) == 1
    assert not (receipt.get("procedural") or {})


async def test_two_peers_proposing_one_skill_get_two_drafts_and_forgetting_one_keeps_the_other(
    make_runtime, procedural, good, chat, tmp_path
):
    """Issue 36 item 2: zed's `deploy-billing` overwrote ann's draft, and `thoth forget --peer zed` then removed
    ann's draft and blanked ann's audit entries."""
    skill = {"name": "deploy-billing", "description": "Deploy billing.", "body": "1. Build billing."}
    rules = [{"purpose": "reflection", "reply": json.dumps(dict(good, skill=skill))}, {"reply": "Sure."}]
    runtime = make_runtime({"reflection": reflection, "procedural": procedural}, replies=rules, root=tmp_path)
    await chat(runtime, "billing deploys", peer="ann")
    await chat(runtime, "billing deploys", peer="zed")
    drafts = drafts_of(tmp_path, "deploy-billing")
    owners = {json.loads((d / "draft.json").read_text())["source"]["peer"]: d for d in drafts}
    assert sorted(owners) == ["ann", "zed"]  # two drafts: neither overwrote the other
    items = {i["peer"]: i["id"] for i in await runtime.approvals(actor="lead") if i["kind"] == "skill"}
    assert items == {peer: f"skill:{folder.name}" for peer, folder in owners.items()}
    audit = Path(runtime.home) / "procedural" / "audit.jsonl"
    anns_entries = [line for line in audit.read_text().splitlines() if '"ann"' in line]

    receipt = await runtime.forget(peer="zed")

    assert receipt["procedural"] == {"skill drafts": 1, "audit entries blanked": 1}
    assert drafts_of(tmp_path, "deploy-billing") == [owners["ann"]]
    assert [line for line in audit.read_text().splitlines() if '"ann"' in line] == anns_entries
    assert '"zed"' not in audit.read_text()
    assert [i["id"] for i in await runtime.approvals(actor="lead") if i["kind"] == "skill"] == [items["ann"]]


async def test_two_peers_holding_the_same_note_get_two_items_and_forgetting_one_keeps_the_others(
    reflecting, chat, good
):
    """The reflection queue has no item collision to fix (ids are random, twins are per owner); this keeps it so."""
    good["memory_notes"] = ["Bob is leaving the team."]
    runtime, _ = reflecting([json.dumps(good)])
    ann = await chat(runtime, "hi", peer="ann")
    zed = await chat(runtime, "hi", peer="zed")
    pending = await runtime.approvals(actor="lead")
    held = {i["peer"]: i["id"] for i in pending if i["body"] == "Bob is leaving the team."}
    assert sorted(held) == ["ann", "zed"] and held["ann"] != held["zed"]
    store = state(runtime).store
    anns_audit = [e for e in store.audit_log() if e["session_id"] == ann.id]

    await runtime.forget(peer="zed")

    assert store.item(held["ann"])["status"] == "pending" and store.item(held["zed"]) is None
    assert [e for e in store.audit_log() if e["session_id"] == ann.id] == anns_audit
    assert all(e["payload"] == {"forgotten": True} for e in store.audit_log() if e["session_id"] == zed.id)
