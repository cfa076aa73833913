"""The working layer's memory records, on both dialects: each session with its transcript, read-only, one peer's."""

from __future__ import annotations

from thoth_working import plugin as working


async def test_sessions_are_listed_with_their_transcripts_and_never_shown_to_another_peer(make_runtime, storage_config):
    runtime = make_runtime({"working": working}, config=storage_config, replies=[{"reply": "Paris."}] * 4)
    await runtime.turn("Capital of France?", peer="ann", thread="geo")
    await runtime.turn("And of Italy?", peer="ann", thread="geo")
    await runtime.turn("Tea or coffee?", peer="ann", thread="food")
    await runtime.turn("Hello", peer="bob", thread="geo")
    await runtime.drain()
    records = await runtime.records(peer="ann", layer="working")
    assert [r["meta"]["thread"] for r in records] == ["food", "geo"]  # the most recently active first
    food, geo = records
    assert (geo["plugin"], geo["kind"], geo["editable"], geo["meta"]["turns"]) == ("working", "session", False, 2)
    assert geo["text"] == "user: Capital of France?\nagent: Paris.\nuser: And of Italy?\nagent: Paris."
    assert await runtime.records(peer="ann", before=food["at"]) == [geo]
    assert await runtime.records(peer="ann", kind="episode") == []

    one = await runtime.get_record(record_id=geo["id"], peer="ann")
    assert one is not None and [e["user"] for e in one["meta"]["entries"] if e["type"] == "turn"] == [
        "Capital of France?",
        "And of Italy?",
    ]
    assert await runtime.get_record(record_id=geo["id"], peer="bob") is None  # a stranger asking for ann's id
    assert await runtime.get_record(record_id=geo["id"], peer="ann", workspace="elsewhere") is None
    assert await runtime.edit_record(record_id=geo["id"], text="rewritten", peer="ann") is None
    assert await runtime.delete_record(record_id=geo["id"], peer="ann") is False
    assert await runtime.get_record(record_id="session:nope", peer="ann") is None
    assert [r["text"] for r in await runtime.records(peer="bob")] == ["user: Hello\nagent: Paris."]
