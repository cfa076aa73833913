"""Each span of turns is reflected once: a resumed session's second end sees only its new turns."""

from __future__ import annotations

import json

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection.reflect import reflect
from thoth_reflection.settings import state


def reflections(runtime):
    """The prompts of the reflection requests this runtime's model received."""
    return [r.messages[-1].content for r in runtime.model().requests if r.purpose == "reflection"]


def persona_items(runtime):
    return [i for i in state(runtime).store.all_items() if i["kind"] == "persona-observation"]


@pytest.fixture
def restartable(make_runtime, fakes, good, tmp_path):
    """Factory: a runtime with the real working layer and reflection on one home (one per 'process')."""
    working = pytest.importorskip("thoth_working.plugin")

    def start(reflection_reply=None, repair_reply=None):
        rules = [{"purpose": "reflection", "reply": reflection_reply or json.dumps(good)}]
        if repair_reply is not None:
            rules.append({"purpose": "reflection-repair", "reply": repair_reply})
        rules.append({"reply": "Noted."})
        notices = fakes["notices"]()
        runtime = make_runtime(
            {"working": working, "reflection": reflection, "notices": notices}, replies=rules, root=tmp_path
        )
        return runtime, notices

    return start


async def end(runtime, reason, *, peer="ann", thread="slack-C1"):
    await runtime.end_session(await runtime.session(peer=peer, thread=thread), reason)
    await runtime.drain()


async def test_a_resumed_session_reflects_only_its_new_turns_and_queues_once(restartable):
    first, first_notices = restartable()
    await first.turn("We deploy from the main branch.", peer="ann", thread="slack-C1")
    await end(first, "exit")  # the frontend exits: the session may resume
    [before] = reflections(first)
    assert "We deploy from the main branch." in before
    session_id = state(first).store.runs()[0]["session_id"]
    await first.aclose()

    second, second_notices = restartable()
    resumed = await second.turn("And staging is rebuilt nightly.", peer="ann", thread="slack-C1")
    assert resumed.session.id == session_id  # the working layer resumed it, whole transcript included
    await end(second, "done")
    [after] = reflections(second)
    assert "And staging is rebuilt nightly." in after
    assert "We deploy from the main branch." not in after and "first 1 turns were reflected" in after

    [item] = persona_items(second)  # the same observation came back: still one pending item
    assert item["status"] == "pending" and item["text"] == "Lead with the command, then explain."
    assert [p["item_id"] for e, p in second_notices.events if e == "persona_observation"] == []
    store = state(second).store
    assert [r["status"] for r in store.runs(session_id)] == ["ok", "ok"]
    assert [e["payload"]["item"] for e in store.audit_log(event="duplicate")] == [item["id"]]
    started = [e["payload"] for e in store.audit_log(event="run_started")]
    assert [(p["turns"], p["earlier_turns"]) for p in started] == [(1, 0), (1, 1)]


async def test_a_resumed_session_ended_without_new_turns_is_not_reflected_again(restartable):
    first, _ = restartable()
    await first.turn("We deploy from the main branch.", peer="ann", thread="slack-C1")
    await end(first, "exit")
    await first.aclose()

    second, _ = restartable()
    session = await second.session(peer="ann", thread="slack-C1")
    assert [t["user"] for t in session.transcript if t["type"] == "turn"] == ["We deploy from the main branch."]
    await end(second, "done")
    assert reflections(second) == []
    assert len(state(second).store.runs()) == 1


async def test_a_failed_run_leaves_its_turns_for_the_next_end(restartable):
    first, _ = restartable(reflection_reply="not json", repair_reply="still not json")
    await first.turn("We deploy from the main branch.", peer="ann", thread="slack-C1")
    await end(first, "exit")
    assert [r["status"] for r in state(first).store.runs()] == ["failed"]
    await first.aclose()

    second, _ = restartable()
    await second.turn("And staging is rebuilt nightly.", peer="ann", thread="slack-C1")
    await end(second, "done")
    [prompt] = reflections(second)
    assert "We deploy from the main branch." in prompt and "And staging is rebuilt nightly." in prompt
    assert len(persona_items(second)) == 1


async def test_again_reflects_every_turn_without_queueing_twins(restartable):
    runtime, _ = restartable()
    await runtime.turn("We deploy from the main branch.", peer="ann", thread="slack-C1")
    session = await runtime.session(peer="ann", thread="slack-C1")
    await end(runtime, "done")
    assert await reflect(session, "manual", runtime=runtime) is None  # nothing new
    assert await reflect(session, "manual", runtime=runtime, again=True) is not None
    first, again = reflections(runtime)
    assert "We deploy from the main branch." in again and "reflected before" not in again
    assert len(persona_items(runtime)) == 1
