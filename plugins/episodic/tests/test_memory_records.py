"""Episodic memory records through the runtime, on both backends: newest first, versions, delete, scoping."""

from __future__ import annotations

import dataclasses

from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.memory_records import newest
from thoth_episodic.records import Episode


async def test_episodes_are_listed_newest_first_and_paged(make_runtime, storage_config):
    runtime = make_runtime({"episodic": plugin}, config=storage_config, replies=[{"reply": "Noted."}] * 5)
    for text in ("I adopted a cat called Miso.", "The car needs new tyres.", "I prefer tea to coffee."):
        await runtime.turn(text, peer="ann", thread="t1")
    await runtime.turn("I like football.", peer="bob", thread="b")
    await runtime.drain()
    records = await runtime.records(peer="ann", layer="episodic")
    assert [r["text"] for r in records] == [
        "I prefer tea to coffee.",
        "The car needs new tyres.",
        "I adopted a cat called Miso.",
    ]
    first = records[0]
    assert (first["plugin"], first["kind"], first["editable"], first["deletable"]) == (
        "episodic",
        "episode",
        False,
        True,
    )
    assert first["meta"]["thread"] == "t1" and first["meta"]["reply"] == "Noted."
    assert await runtime.records(peer="ann", kind="episode", limit=1) == records[:1]
    assert await runtime.records(peer="ann", before=records[0]["at"]) == records[1:]
    assert await runtime.records(peer="ann", kind="fact") == []
    assert [r["text"] for r in await runtime.records(peer="bob")] == ["I like football."]


async def test_an_episode_shows_the_versions_it_replaced_and_is_deleted_like_a_forget_reaction(
    make_runtime, storage_config
):
    runtime = make_runtime({"episodic": plugin}, config=storage_config)
    store = memory_for(runtime).store
    cut = Episode(workspace="default", peer="ann", thread="t", user="Tell me about Porto.", assistant="Porto is")
    store.add([cut])
    store.add([dataclasses.replace(cut, assistant="Porto is a city in Portugal.")])
    record = await runtime.get_record(record_id=cut.id, peer="ann")
    assert record is not None and record["meta"]["reply"] == "Porto is a city in Portugal."
    assert [h["meta"]["reply"] for h in record["history"]] == ["Porto is"]

    assert await runtime.get_record(record_id=cut.id, peer="bob") is None  # a stranger asking for ann's id
    assert await runtime.get_record(record_id=cut.id, peer="ann", workspace="other") is None
    assert await runtime.delete_record(record_id=cut.id, peer="bob") is False
    assert await runtime.edit_record(record_id=cut.id, text="Tell me about Lisbon.", peer="ann") is None
    assert store.get(cut.id) is not None

    assert await runtime.delete_record(record_id=cut.id, peer="ann") is True
    assert store.get(cut.id) is None and await runtime.records(peer="ann") == []
    assert await runtime.delete_record(record_id=cut.id, peer="ann") is False


def test_a_backend_without_paging_is_read_through_the_protocol():
    class Plain:  # only the protocol's `episodes`, oldest first
        def episodes(self, *, workspace, peer, agent):
            return (Episode(workspace, peer, "t", f"turn {i}", occurred_at=float(i), agent=agent) for i in range(5))

    found = newest(Plain(), workspace="w", peer="ann", agent="default", limit=2, before=4.0)  # type: ignore[arg-type]
    assert [e.user for e in found] == ["turn 3", "turn 2"]
