"""Procedural memory records: persona files, skills and knowledge notes, read-only, the same for every peer."""

from __future__ import annotations

import os

from thoth_procedural.defaults import copy_defaults


async def test_persona_skills_and_knowledge_are_listed_read_only_newest_first(runtime_at, skill, tmp_path):
    copy_defaults(tmp_path)
    skill("greet-warmly", description="Greets people warmly.")
    runtime = runtime_at()
    records = await runtime.records(peer="ann", layer="procedural")
    assert {r["kind"] for r in records} == {"persona", "skill", "knowledge"}
    assert all(r["plugin"] == "procedural" and r["editable"] is False for r in records)
    assert [r["at"] for r in records] == sorted((r["at"] for r in records), reverse=True)
    by_id = {r["id"]: r for r in records}
    identity = by_id["persona:IDENTITY.md"]
    assert identity["text"].startswith("# Identity") and identity["meta"]["path"] == "persona/IDENTITY.md"
    assert by_id["skill:greet-warmly"]["meta"]["description"] == "Greets people warmly."
    assert by_id["skill:greet-warmly"]["meta"]["path"] == ".claude/skills/greet-warmly/SKILL.md"
    assert any(i.startswith("knowledge:") for i in by_id)

    os.utime(tmp_path / "persona" / "SOUL.md", (1.0, 1.0))  # the oldest: last, and alone before 2.0
    assert (await runtime.records(peer="ann", layer="procedural", before=2.0))[0]["id"] == "persona:SOUL.md"
    assert [r["kind"] for r in await runtime.records(peer="ann", kind="skill")] == ["skill"] * len(
        [i for i in by_id if i.startswith("skill:")]
    )
    assert len(await runtime.records(peer="ann", layer="procedural", limit=2)) == 2
    now = await runtime.records(peer="ann", layer="procedural")
    assert await runtime.records(peer="bob", layer="procedural") == now  # the agent's files: in every peer's context


async def test_one_record_by_id_and_ids_that_name_nothing(runtime_at, skill, tmp_path):
    copy_defaults(tmp_path)
    skill("greet-warmly")
    runtime = runtime_at()
    one = await runtime.get_record(record_id="skill:greet-warmly", peer="ann")
    assert one is not None and one["history"] == [] and "Step one." in one["text"]
    for missing in ("persona:MEMORY.md", "persona:../x", "skill:../../etc", "skill:nope", "knowledge:nope", "x:y", ""):
        assert await runtime.get_record(record_id=missing, peer="ann") is None
    assert await runtime.edit_record(record_id="persona:SOUL.md", text="Be rude.", peer="ann") is None
    assert await runtime.delete_record(record_id="persona:SOUL.md", peer="ann") is False
    assert "Be rude." not in (tmp_path / "persona" / "SOUL.md").read_text()
