"""The blackboard's memory records: the posts a peer published, theirs only, read-only."""

from __future__ import annotations

import thoth_blackboard.plugin as plugin


async def test_a_peer_sees_the_posts_they_published_and_no_one_elses(make_runtime):
    runtime = make_runtime({"blackboard": plugin})
    await runtime.turn("/board put task:1:status done", peer="ann", thread="t")
    await runtime.turn("/board put task:2:status started", peer="ann", thread="t")
    await runtime.turn("/board put task:3:status mine", peer="bob", thread="t")
    await plugin.board_for(runtime).publish("index:status", "ready", publisher="indexer")

    records = await runtime.records(peer="ann", layer="blackboard")
    assert [r["text"] for r in records] == ["task:2:status = started", "task:1:status = done"]
    assert all((r["plugin"], r["kind"], r["editable"]) == ("blackboard", "post", False) for r in records)
    assert await runtime.records(peer="ann", layer="working") == records  # the plugin's layer
    assert await runtime.records(peer="ann", before=records[0]["at"]) == records[1:]
    assert await runtime.records(peer="ann", kind="episode") == []
    one = await runtime.get_record(record_id="post:task:1:status", peer="ann")
    assert one is not None and one["meta"]["value"] == "done"
    assert await runtime.get_record(record_id="post:task:1:status", peer="bob") is None  # a stranger: nothing
    assert await runtime.get_record(record_id="post:task:1:status", peer="ann", workspace="other") is None
    assert await runtime.get_record(record_id="post:index:status", peer="ann") is None  # an agent's post
    assert await runtime.delete_record(record_id="post:task:1:status", peer="ann") is False
    assert [r["text"] for r in await runtime.records(peer="bob")] == ["task:3:status = mine"]
