"""Reflection's memory records: approved reflexion records (every peer's) and approved rules (their owner's only)."""

from __future__ import annotations

from thoth_reflection import plugin as reflection
from thoth_reflection import queue
from thoth_reflection.settings import state

from thoth_core import Session

RECORD = """---
date: 2026-01-01
agent: thoth
task: nightly backup
---
## Known Issue
postgres connection refused on port 5432 during the nightly backup

## Solution
Wait for the database to come back after 02:15.
"""


async def test_reflexion_records_and_rules_are_listed_and_a_rule_stays_with_its_peer(make_runtime, tmp_path):
    (tmp_path / "reflexion").mkdir()
    (tmp_path / "reflexion" / "2026-01-01-backup.md").write_text(RECORD)
    (tmp_path / "reflexion" / "broken.md").write_text("no frontmatter")
    runtime = make_runtime({"reflection": reflection})
    st = state(runtime)
    ann, bob = Session("default", "ann", "t", runtime=runtime), Session("default", "bob", "t", runtime=runtime)
    about_ann = queue.observe(st, text="Lead with the command.", session=ann, run_id="r1", flags=[])
    about_bob = queue.observe(st, text="Bob likes detail.", session=bob, run_id="r2", flags=[])
    pending = queue.observe(st, text="Never guess.", session=ann, run_id="r3", flags=[])
    guideline = queue.propose_guideline(st, record="2026-01-01-backup.md", text="Wait after 02:15.", actor="lead")
    for item in (about_ann, about_bob, guideline):
        await runtime.decide(item, "approve", actor="lead")
    await runtime.drain()

    records = await runtime.records(peer="ann", layer="reflection")
    by_id = {r["id"]: r for r in records}
    assert set(by_id) == {
        "reflexion:2026-01-01-backup.md",
        "reflexion:broken.md",
        f"rule:{about_ann}",
        f"rule:{guideline}",
    }  # not bob's rule, not the pending one
    assert f"rule:{pending}" not in by_id and all(r["editable"] is False for r in records)
    backup = by_id["reflexion:2026-01-01-backup.md"]
    assert backup["meta"]["task"] == "nightly backup" and "Known Issue" in backup["text"]
    assert "problem" in by_id["reflexion:broken.md"]["meta"]
    assert by_id[f"rule:{about_ann}"]["text"] == "Lead with the command."
    assert await runtime.records(peer="ann", kind="rule", limit=1) == [r for r in records if r["kind"] == "rule"][:1]

    assert await runtime.get_record(record_id=f"rule:{about_ann}", peer="bob") is None  # a stranger: nothing
    assert await runtime.get_record(record_id=f"rule:{about_ann}", peer="ann", workspace="other") is None
    assert (await runtime.get_record(record_id=f"rule:{about_bob}", peer="bob"))["text"] == "Bob likes detail."
    assert (await runtime.get_record(record_id=f"rule:{guideline}", peer="bob")) is not None
    assert await runtime.get_record(record_id=f"rule:{pending}", peer="ann") is None
    one = await runtime.get_record(record_id="reflexion:2026-01-01-backup.md", peer="bob")
    assert one is not None and one["history"] == []
    for bad in ("reflexion:../x.md", "reflexion:nope.md", "rule:nope", f"rule:{about_ann}x"):
        assert await runtime.get_record(record_id=bad, peer="ann") is None
    assert await runtime.delete_record(record_id=f"rule:{about_ann}", peer="ann") is False
