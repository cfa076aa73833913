"""The `recall` hook: episodic and identity answer a query with one peer's items, and why each matched."""

from __future__ import annotations

import pytest

thoth_episodic = pytest.importorskip("thoth_episodic.plugin")
thoth_identity = pytest.importorskip("thoth_identity.plugin")


async def recalled(runtime, query: str, peer: str) -> list[dict]:
    outcomes = await runtime.call("recall", query=query, peer=peer, workspace="default", limit=5, runtime=runtime)
    assert all(call.status == "ok" for _, _, call in outcomes), [call.error for _, _, call in outcomes]
    return [item for _, items, _ in outcomes for item in items or []]


async def test_recall_finds_a_peers_fact_and_episode_and_nothing_of_another_peer(make_runtime):
    runtime = make_runtime({"episodic": thoth_episodic, "identity": thoth_identity}, replies=[{"reply": "Noted."}])
    await runtime.turn("/remember I am allergic to peanuts", peer="alice", thread="t1")
    await runtime.turn("We planned the glacier hike for Saturday morning", peer="alice", thread="t1")
    await runtime.drain()

    items = await recalled(runtime, "peanuts allergy", "alice")
    assert any(i["layer"] == "identity" and "peanuts" in i["text"] for i in items), items
    hikes = await recalled(runtime, "when is the glacier hike", "alice")
    [episode] = [i for i in hikes if i["layer"] == "episodic"]
    assert "glacier" in episode["text"] and episode["thread"] == "t1" and "score" in episode["why"]

    assert await recalled(runtime, "peanuts allergy", "bob") == []
    assert await recalled(runtime, "when is the glacier hike", "bob") == []
    await runtime.aclose()
