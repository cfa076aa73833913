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
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes())


@pytest.fixture
def procedural():
    return pytest.importorskip("thoth_procedural.plugin")


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
    pending = queue.propose_promotion(st, record_id=record.id, topic="deploys", text=f"Build {secret} first.", actor="lead")
    approved = queue.propose_promotion(st, record_id=record.id, topic="deploys", text=f"Then ship {secret}.", actor="lead")
    await runtime.decide(approved, "approve", actor="lead")
    knowledge = tmp_path / "knowledge" / "deploys.md"
    assert secret in knowledge.read_text() and (tmp_path / ".claude" / "skill-drafts" / "deploy-staging").is_dir()

    with caplog.at_level(logging.WARNING):
        receipt = await runtime.forget(peer="ann")

    assert st.store.item(pending) is None and st.store.item(approved) is None
    assert not any(secret in json.dumps(e["payload"]) for e in st.store.audit_log())
    assert not (tmp_path / ".claude" / "skill-drafts" / "deploy-staging").exists()
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
    await runtime.decide("skill:deploy-staging", "approve", actor="lead")
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
    assert st.store.item(item) is not None and (tmp_path / ".claude" / "skill-drafts" / "deploy-staging").is_dir()
    assert not (receipt.get("procedural") or {})
