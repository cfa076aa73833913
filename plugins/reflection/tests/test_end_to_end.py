"""End to end: a scripted session with the replay model ends; every layer gets its part.

Runs with the real working and identity plugins (skipped when they are not installed) and
with the real procedural plugin when it is installed, else a contract-following fake.
"""

from __future__ import annotations

import json

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection.settings import state

from thoth_core.testing import context_for


def procedural_variants():
    try:
        import thoth_procedural.plugin  # noqa: F401
    except ImportError:
        return ["fake"]
    return ["fake", "real"]


@pytest.mark.parametrize("procedural", procedural_variants())
async def test_scripted_session_reaches_every_layer(procedural, make_runtime, fakes, good, tmp_path):
    working = pytest.importorskip("thoth_working.plugin")
    identity = pytest.importorskip("thoth_identity.plugin")
    if procedural == "real":
        import thoth_procedural.plugin as procedural_layer
    else:
        procedural_layer = fakes["procedural"]()
    notices = fakes["notices"]()
    rules = [{"purpose": "reflection", "reply": json.dumps(good)}, {"reply": "Run make deploy ENV=staging."}]
    runtime = make_runtime(
        {
            "working": working,
            "identity": identity,
            "procedural": procedural_layer,
            "reflection": reflection,
            "notices": notices,
        },
        replies=rules,
        config={"thoth": {"founders": ["lead"]}},
        root=tmp_path,
    )

    await runtime.turn("How do I deploy to staging?", peer="ann", thread="t1")
    await runtime.turn("My token is ghp_" + "Q" * 36 + ", thanks", peer="ann", thread="t1")
    session = (await runtime.turn("/done", peer="ann", thread="t1")).session
    await runtime.drain()

    memory = (tmp_path / "persona" / "MEMORY.md").read_text()
    assert (
        "Ann deploys to staging every Friday." in memory
        and "[REDACTED:github-token]" in memory
        and "a1B2c3D4" not in memory
    )

    items = {i["id"]: i for i in await runtime.approvals(actor="lead")}
    [skill] = [i for i in items if i.split("--")[0] == "skill:deploy-staging"]  # the real one keys drafts by owner
    persona = [i for i in items.values() if i["kind"] == "persona-observation"]
    assert len(persona) == 1 and persona[0]["source"]["session"] == session.id
    announced = {p.get("item_id") for e, p in notices.events}
    assert skill in announced and persona[0]["id"] in announced

    outcome = await runtime.decide(skill, "approve", actor="lead")
    assert outcome is not None
    if procedural == "real":
        assert (tmp_path / ".claude" / "skills" / "deploy-staging" / "SKILL.md").exists()
        listing = (await runtime.turn("/skills", peer="ann", thread="t2")).reply.text
        assert "deploy-staging" in listing
    else:
        assert "deploy-staging" in procedural_layer.skills
    assert skill not in {i["id"] for i in await runtime.approvals(actor="lead")}
    await runtime.decide(persona[0]["id"], "approve", actor="lead")

    exported = identity.backend_for(runtime).export("default", "ann")
    assert any(o["content"] == "Prefers terse answers." and o["author"] == "agent" for o in exported["observations"])

    store = state(runtime).store
    [run] = store.runs(session.id)
    events = [e["event"] for e in store.audit_log(run_id=run["run_id"])]
    for event in (
        "run_started",
        "result",
        "memory_notes_written",
        "queued",
        "fanout",
        "check_in_scheduled",
        "decision",
    ):
        assert event in events, event
    fanout = store.audit_log(event="fanout")[0]["payload"]
    assert fanout["identity"] == "ok" and fanout["procedural"] == "ok" and fanout["reflection"] == "ok"

    later = await context_for(runtime, "what do you remember?", peer="ann", thread="t3")
    assert any("Ann deploys to staging every Friday." in b.text for b in later.blocks if b.plugin == "working")


async def test_a_peers_notes_reach_only_that_peer_and_forget_removes_them(make_runtime, good, tmp_path):
    working = pytest.importorskip("thoth_working.plugin")
    memory_file = tmp_path / "persona" / "MEMORY.md"
    memory_file.parent.mkdir()
    memory_file.write_text("# Memory\n\n- The office is closed on Mondays.\n")
    notes = dict(good, memory_notes=["The user's codeword is zebra-42."], user_model_updates={})
    rules = [{"purpose": "reflection", "reply": json.dumps(notes)}, {"reply": "Noted."}]
    runtime = make_runtime({"working": working, "reflection": reflection}, replies=rules, root=tmp_path)

    await runtime.turn("My codeword is zebra-42.", peer="alice", thread="a1")
    await runtime.turn("/done", peer="alice", thread="a1")
    await runtime.drain()
    assert "zebra-42" in memory_file.read_text() and "<!-- peer:alice ws:default -->" in memory_file.read_text()

    own = await context_for(runtime, "What is my codeword?", peer="alice", thread="a2")
    other = await context_for(runtime, "What is my codeword?", peer="bob", thread="b1")
    assert "zebra-42" in own.system and "peer:alice" not in own.system
    assert "zebra-42" not in other.system and "closed on Mondays" in other.system

    receipt = await runtime.forget(peer="alice")
    assert receipt["reflection"]["memory lines"] == 1 and "zebra-42" not in memory_file.read_text()
    for peer in ("alice", "bob"):
        after = await context_for(runtime, "What is my codeword?", peer=peer, thread="after")
        assert "zebra-42" not in after.system and "closed on Mondays" in after.system


async def test_done_after_a_restart_reflects_on_the_whole_session(make_runtime, good, tmp_path):
    working = pytest.importorskip("thoth_working.plugin")
    rules = [{"purpose": "reflection", "reply": json.dumps(good)}, {"reply": "Noted."}]
    first = make_runtime({"working": working, "reflection": reflection}, replies=rules, root=tmp_path)
    await first.turn("We deploy from the main branch.", peer="ann", thread="slack-C1")
    await first.aclose()  # the process restarts

    second = make_runtime({"working": working, "reflection": reflection}, replies=rules, root=tmp_path)
    await second.turn("And staging is rebuilt nightly.", peer="ann", thread="slack-C1")
    await second.turn("/done", peer="ann", thread="slack-C1")
    await second.drain()
    [request] = [r for r in second.model().requests if r.purpose == "reflection"]
    prompt = request.messages[-1].content
    assert "We deploy from the main branch." in prompt and "And staging is rebuilt nightly." in prompt
