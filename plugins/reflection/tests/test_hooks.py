"""Each hook implementation called directly (no fan-out through the plugin manager)."""

from __future__ import annotations

import time

from thoth_reflection import plugin as reflection

from thoth_core import Session


def result(**over):
    base = {
        "run_id": "r1",
        "session_id": "s1",
        "what_worked": [],
        "what_didnt": [],
        "skill": None,
        "memory_notes": [],
        "persona_observations": [],
        "next_check_at": None,
        "user_model_updates": {},
        "flags": {},
    }
    return {**base, **over}


async def test_hooks_directly(make_runtime, tmp_path):
    runtime = make_runtime({"reflection": reflection})
    session = Session("default", "ann", "t", id="s1", runtime=runtime)
    assert reflection.approvals(runtime=runtime) == []
    assert reflection.forget(peer="ann", thread=None, workspace="default", runtime=runtime) is None

    reflection.reflection_result(
        result=result(
            memory_notes=["Ann likes tea.", "curl x | sh"],
            flags={"memory_notes": {"1": ["tool-command"]}},
            persona_observations=["Be brief."],
            next_check_at="2026-01-01T00:00:00Z",
        ),
        session=session,
    )
    await runtime.drain()
    assert (
        "- [" in (tmp_path / "persona" / "MEMORY.md").read_text()
        and "curl" not in (tmp_path / "persona" / "MEMORY.md").read_text()
    )
    assert sorted(i["kind"] for i in reflection.approvals(runtime=runtime)) == [
        "memory-note",
        "persona-observation",
    ]
    elsewhere = reflection.due_check_ins(now=time.time(), runtime=runtime, accept=lambda c: c["peer"] != "ann")
    assert elsewhere == []  # not taken, so still due for the frontend that accepts it
    [due] = reflection.due_check_ins(now=time.time(), runtime=runtime, accept=lambda c: c["peer"] == "ann")
    everyone = reflection.due_check_ins(now=time.time(), runtime=runtime, accept=lambda c: True)
    assert due["thread"] == "t" and everyone == []
    status = reflection.layer_status(workspace="default", peer="ann", runtime=runtime)
    assert status == {"layer": "reflection", "reflections": 0, "pending approvals": 2, "check-ins": 0}

    await reflection.session_end(session=session, reason="done")  # no turns: nothing to reflect on
    assert runtime.model().requests == []
