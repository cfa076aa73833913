"""The identity layer's memory records through the runtime, on both dialects: list, history, edit, delete, scoping."""

from __future__ import annotations

import json
from typing import Any

import pytest
from thoth_identity import plugin
from thoth_identity.plugin import backend_for

from thoth_core.errors import InputError


async def remember(runtime: Any, *texts: str, peer: str = "ann") -> None:
    for text in texts:
        await runtime.turn(f"/remember {text}", peer=peer, thread="t")


HELD = ("my name is Ann", "my sister Maria lives in Berlin", "I am training for the Bergen marathon")


def by_text(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["text"]: r for r in records}


async def test_facts_notes_and_entities_are_listed_newest_first_with_the_graph_in_meta(make_runtime, storage_config):
    runtime = make_runtime({"identity": plugin}, config=storage_config)
    await remember(runtime, *HELD)
    records = await runtime.records(peer="ann")
    assert [r["at"] for r in records] == sorted((r["at"] for r in records), reverse=True)
    assert {r["plugin"] for r in records} == {"identity"} and {r["layer"] for r in records} == {"identity"}
    held = by_text(records)
    assert held["name: Ann"]["kind"] == "fact" and held["name: Ann"]["editable"] is True
    assert held["Maria, location: Berlin"]["meta"]["subject"] == "Maria"
    assert held["I am training for the Bergen marathon"]["kind"] == "note"
    maria, ann = held["Maria"], held["ann"]
    assert maria["kind"] == ann["kind"] == "entity" and maria["editable"] is False
    assert {(link["predicate"], link["to"], link["entity"]) for link in ann["meta"]["links"]} >= {
        ("sister", "Maria", True)
    }
    assert [link["to"] for link in maria["meta"]["links"]] == ["Berlin"]

    facts = await runtime.records(peer="ann", kind="fact")
    assert {r["kind"] for r in facts} == {"fact"} and len(facts) == 3
    assert await runtime.records(peer="ann", layer="episodic") == []
    first, *rest = await runtime.records(peer="ann", limit=2)
    assert len(rest) == 1
    older = await runtime.records(peer="ann", before=rest[0]["at"])
    assert all(r["at"] < rest[0]["at"] for r in older) and len(older) == len(records) - 2 - sum(
        r["at"] == rest[0]["at"] for r in records[2:]
    )


async def test_editing_a_fact_is_a_correction_whose_old_value_is_its_history(make_runtime, storage_config, thoth_home):
    runtime = make_runtime({"identity": plugin}, config=storage_config)
    await remember(runtime, "my name is Ann", "I like tea", "I like coffee")
    held = by_text(await runtime.records(peer="ann", kind="fact"))
    edited = await runtime.edit_record(record_id=held["likes: tea"]["id"], text="green tea", peer="ann")
    assert edited is not None and edited["text"] == "likes: green tea" and edited["id"] != held["likes: tea"]["id"]
    assert [h["text"] for h in edited["history"]] == ["likes: tea"] and edited["history"][0]["editable"] is False
    # a many-valued predicate keeps its other values (before, /correct closed every `likes`)
    assert set(by_text(await runtime.records(peer="ann", kind="fact"))) == {
        "name: Ann",
        "likes: green tea",
        "likes: coffee",
    }
    again = await runtime.get_record(record_id=edited["id"], peer="ann")
    assert again is not None and again["plugin"] == "identity" and again["history"] == edited["history"]
    # the /correct listing sees the same item
    listing = (await runtime.turn("/correct", peer="ann", thread="t")).reply.text
    assert f"{edited['id']}  likes: green tea" in listing
    if not storage_config:
        audit = (thoth_home / "identity" / "corrections.jsonl").read_text().splitlines()
        assert [(a["actor"], a["action"]) for a in map(json.loads, audit)] == [("records", "edit")]


async def test_a_note_is_edited_and_deleted_and_leaves_the_file(make_runtime, storage_config, thoth_home):
    runtime = make_runtime({"identity": plugin}, config=storage_config)
    await remember(runtime, "I am training for the Bergen marathon")
    (note,) = await runtime.records(peer="ann", kind="note")
    edited = await runtime.edit_record(record_id=note["id"], text="I ran the Oslo marathon", peer="ann")
    assert edited is not None and edited["kind"] == "note" and edited["text"] == "I ran the Oslo marathon"
    assert await runtime.delete_record(record_id=edited["id"], peer="ann") is True
    assert await runtime.records(peer="ann") == []
    assert await runtime.get_record(record_id=edited["id"], peer="ann") is None
    assert await runtime.delete_record(record_id=edited["id"], peer="ann") is False
    if not storage_config:
        await runtime.drain()
        raw = b"".join(p.read_bytes() for p in (thoth_home / "identity").iterdir() if p.is_file())
        assert b"Bergen" not in raw and b"Oslo marathon" not in raw


async def test_a_stranger_never_reads_or_changes_anothers_records(make_runtime, storage_config):
    runtime = make_runtime({"identity": plugin}, config=storage_config)
    await remember(runtime, *HELD)
    await remember(runtime, "my name is Bob", peer="bob")
    alices = await runtime.records(peer="ann")
    for record in alices:
        assert await runtime.get_record(record_id=record["id"], peer="bob") is None
        assert await runtime.edit_record(record_id=record["id"], text="Mallory", peer="bob") is None
        assert await runtime.delete_record(record_id=record["id"], peer="bob") is False
        assert await runtime.get_record(record_id=record["id"], peer="ann", workspace="other") is None
    assert await runtime.records(peer="ann") == alices
    assert "name: Ann" not in by_text(await runtime.records(peer="bob"))
    assert await runtime.records(peer="carol") == []


async def test_read_only_ids_bad_ids_and_refused_text(make_runtime):
    runtime = make_runtime({"identity": plugin})
    await remember(runtime, "my name is Ann")
    (fact,) = await runtime.records(peer="ann", kind="fact")
    assert await runtime.edit_record(record_id="e:ann", text="Anna", peer="ann") is None
    assert await runtime.delete_record(record_id="e:ann", peer="ann") is False
    for bad in ("", "f", "x12", "f12 ", "o-1", "e:nobody"):
        assert await runtime.get_record(record_id=bad, peer="ann") is None
    with pytest.raises(InputError, match="secret"):
        await runtime.edit_record(record_id=fact["id"], text="ghp_" + "a1B2c3D4e5" * 4, peer="ann")
    with pytest.raises(InputError, match="empty"):
        await runtime.edit_record(record_id=fact["id"], text="  ", peer="ann")
    with pytest.raises(InputError, match="NUL"):
        await runtime.edit_record(record_id=fact["id"], text="A\x00nn", peer="ann")
    with pytest.raises(InputError, match="peer name"):
        await runtime.records(peer=" ann")
    with pytest.raises(InputError, match="limit"):
        await runtime.records(peer="ann", limit=0)
    assert [f["object"] for f in backend_for(runtime).store.current_facts("default", "ann")] == ["Ann"]
