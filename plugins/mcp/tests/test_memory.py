"""`Memory` in-process, over a runtime with small fake plugins: approvals and recall stay with their peer."""

from __future__ import annotations

import pytest
from thoth_mcp.memory import Memory
from thoth_mcp.scope import Scope

from thoth_core import ThothError, hookimpl


class Queue:
    """An approval queue with an agent-wide item and one item from each of two peers' sessions."""

    __name__ = "queue"

    def __init__(self) -> None:
        self.decided: list[tuple[str, str, str]] = []

    @hookimpl
    def approvals(self):
        return [
            {"id": "q:agent", "kind": "skill", "title": "agent-wide", "source": {}, "flags": []},
            {
                "id": "q:alice",
                "kind": "persona",
                "title": "from alice",
                "source": {"peer": "alice", "workspace": "default"},
            },
            {
                "id": "q:bob",
                "kind": "persona",
                "title": "bob's secret",
                "source": {"peer": "bob", "workspace": "default"},
            },
        ]

    @hookimpl
    def decide(self, item_id, decision, actor):
        if not item_id.startswith("q:"):
            return None
        self.decided.append((item_id, decision, actor))
        return {"message": f"{decision} done: {item_id}"}


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
    queue = Queue()
    runtime = make_runtime({"queue": queue, "notes": Notes(), "broken": Broken()})
    return Memory(runtime, Scope(default_workspace="default")), queue


async def test_approvals_show_the_agents_and_the_peers_own_items_only(memory):
    mem, _ = memory
    answer = await mem.approvals(peer="alice", workspace=None)
    assert [item["id"] for item in answer.data["items"]] == ["q:agent", "q:alice"]
    assert "bob" not in answer.text


async def test_a_peer_cannot_decide_another_peers_item(memory):
    mem, queue = memory
    with pytest.raises(ThothError, match="item_id: no pending item 'q:bob' for peer 'alice'"):
        await mem.decide(item_id="q:bob", decision="approve", peer="alice", workspace=None, reason="")
    answer = await mem.decide(item_id="q:alice", decision="reject", peer="alice", workspace=None, reason="no")
    assert answer.text == "reject done: q:alice"
    assert queue.decided == [("q:alice", "reject", "alice")]


async def test_recall_keeps_to_the_peer_and_reports_a_failing_plugin_without_failing(memory):
    mem, _ = memory
    answer = await mem.recall(query="tea", peer="alice", workspace=None, limit=5)
    assert [hit["text"] for hit in answer.data["hits"]] == ["alice likes green tea"]
    assert answer.data["hits"][0]["plugin"] == "notes"
    assert answer.data["failed"] == [{"plugin": "broken", "status": "error", "error": "RuntimeError: disk on fire"}]
    assert "1. [notes note] alice likes green tea" in answer.text and "words 1" in answer.text
    assert "bob" not in answer.text


async def test_commands_that_no_plugin_offers_are_a_clear_error(memory):
    mem, _ = memory
    with pytest.raises(ThothError, match=r"^/remember is not available: no enabled plugin offers it$"):
        await mem.remember(text="I like tea", peer="alice", workspace=None, thread=None)
    skills = await mem.skills(peer="alice", workspace=None)
    assert skills.data == {"skills": []} and skills.text == "No skills installed."
