"""`Memory` in-process, over a runtime with small fake plugins: approvals (the shared table of the approvals
policy) and recall stay with their peer."""

from __future__ import annotations

import re

import pytest
from thoth_mcp.memory import Memory

from thoth_core import ThothError, hookimpl
from thoth_core.scope import Scope
from thoth_core.testing.approvals import (
    CASES,
    OWNER,
    PERSON,
    STRANGER,
    WORKSPACE,
    AdminPlugin,
    Case,
    QueuePlugin,
    item_id,
    thoth_table,
)


class Notes:
    """A recall plugin that keeps notes per (workspace, peer)."""

    __name__ = "notes"
    NOTES = {("default", "alice"): ["alice likes green tea", "alice plays go"], ("default", "bob"): ["bob likes tea"]}

    @hookimpl
    def recall(self, query, peer, workspace, limit):
        words = set(query.split())
        found = [n for n in self.NOTES.get((workspace, peer), []) if words & set(n.split())]
        return [
            {"layer": "notes", "kind": "note", "id": n, "text": n, "score": 1.0, "why": {"words": 1}, "at": 0}
            for n in found
        ][:limit]


class Broken:
    """A recall plugin that always fails."""

    __name__ = "broken"

    @hookimpl
    def recall(self):
        raise RuntimeError("disk on fire")


@pytest.fixture
def memory(make_runtime):
    queue = QueuePlugin(people={PERSON: "alice", STRANGER: "bob"})
    runtime = make_runtime({"queue": queue, "notes": Notes(), "broken": Broken()}, config={"thoth": {"owner": OWNER}})
    return Memory(runtime, Scope(default_workspace="default")), queue


async def test_approvals_show_a_peer_only_the_items_about_them(memory):
    mem, _ = memory
    answer = await mem.approvals(peer="alice", workspace=None)
    assert [item["id"] for item in answer.data["items"]] == [item_id(PERSON)]
    assert "a note about bob" not in answer.text
    everything = await mem.approvals(peer=OWNER, workspace=None)  # the owner decides: every item
    assert len(everything.data["items"]) == 4


async def test_a_peer_cannot_decide_another_peers_item(memory):
    mem, queue = memory
    with pytest.raises(ThothError, match=f"alice may not approve {item_id(STRANGER)}: it is not about you"):
        await mem.decide(item_id=item_id(STRANGER), decision="approve", peer="alice", workspace=None, reason="")
    answer = await mem.decide(item_id=item_id(PERSON), decision="reject", peer="alice", workspace=None, reason="no")
    assert answer.text == f"reject {item_id(PERSON)} by alice"
    assert queue.decided == [(item_id(PERSON), "reject", "alice")]


MCP_ACTIONS = {"list", "approve", "reject"}  # MCP has no edit tool


@pytest.mark.parametrize("case", [c for c in CASES if c.action in MCP_ACTIONS], ids=lambda c: c.id)
async def test_the_approvals_table(make_runtime, case: Case) -> None:
    queue = QueuePlugin()
    runtime = make_runtime({"queue": queue, "admins": AdminPlugin()}, config={"thoth": thoth_table(case)})
    mem = Memory(runtime, Scope(default_workspace=WORKSPACE))
    target = item_id(case.about)
    if case.action == "list":
        shown = [item["id"] for item in (await mem.approvals(peer=case.actor, workspace=None)).data["items"]]
        assert (target in shown) == case.allowed
        return
    if case.allowed:
        await mem.decide(item_id=target, decision=case.action, peer=case.actor, workspace=None, reason="r")
        assert queue.decided == [(target, case.action, case.actor)]
    else:
        with pytest.raises(ThothError, match=re.escape(case.refusal)):
            await mem.decide(item_id=target, decision=case.action, peer=case.actor, workspace=None, reason="r")
        assert queue.decided == []


async def test_recall_keeps_to_the_peer_and_reports_a_failing_plugin_without_failing(memory):
    mem, _ = memory
    answer = await mem.recall(query="tea", peer="alice", workspace=None, limit=5)
    assert [hit["text"] for hit in answer.data["hits"]] == ["alice likes green tea"]
    assert answer.data["hits"][0]["plugin"] == "notes"
    assert answer.data["failed"] == [{"plugin": "broken", "status": "error", "error": "RuntimeError: disk on fire"}]
    assert "1. [notes note] alice likes green tea" in answer.text and "words 1" in answer.text
    assert "a note about bob" not in answer.text


async def test_commands_that_no_plugin_offers_are_a_clear_error(memory):
    mem, _ = memory
    with pytest.raises(ThothError, match=r"^/remember is not available: no enabled plugin offers it$"):
        await mem.remember(text="I like tea", peer="alice", workspace=None, thread=None)
    skills = await mem.skills(peer="alice", workspace=None)
    assert skills.data == {"skills": []} and skills.text == "No skills installed."
