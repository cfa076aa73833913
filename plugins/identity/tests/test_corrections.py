"""A person corrects what is held about them: edit or delete one fact or observation, audited, erased from the file."""

from __future__ import annotations

import json
import re

from click.testing import CliRunner
from thoth_identity import plugin
from thoth_identity.cli import identity
from thoth_identity.plugin import backend_for

from thoth_core.cli import ThothGroup, ask


async def say(runtime, text: str, peer: str = "ann") -> str:
    return (await runtime.turn(text, peer=peer, thread="t")).reply.text


def ids(listing: str) -> dict[str, str]:
    """Item text -> its id, from `/correct`'s listing."""
    return {text: item for item, text in re.findall(r"^([fo]\d+)  (.+)$", listing, re.MULTILINE)}


async def test_a_peer_fixes_a_fact_and_deletes_a_note_and_neither_reaches_another_peer(make_runtime, thoth_home):
    runtime = make_runtime({"identity": plugin})
    await say(runtime, "/remember my name is Ann")
    await say(runtime, "/remember I am training for the Bergen marathon")
    held = ids(await say(runtime, "/correct"))
    fact, note = held["name: Ann"], held["I am training for the Bergen marathon"]

    assert "has no" in await say(runtime, f"/correct {note} delete", peer="bob")  # not bob's to touch
    assert (
        await say(runtime, f"/correct {fact} Anna")
        == "Corrected ann's name: Anna (the old value stays in its history)."
    )
    assert await say(runtime, f"/correct {note} delete") == f"Deleted ann's observation {note}."

    store = backend_for(runtime).store
    assert [f["object"] for f in store.current_facts("default", "ann")] == ["Anna"]
    assert [f["object"] for f in store.fact_history("default", "ann")] == ["Ann", "Anna"]
    assert store.recent_observations("default", "ann", limit=10) == []
    raw = b"".join(p.read_bytes() for p in (thoth_home / "identity").iterdir() if p.is_file())
    assert b"Bergen" not in raw  # erased from the file, WAL and FTS segments included
    audit = [json.loads(line) for line in (thoth_home / "identity" / "corrections.jsonl").read_text().splitlines()]
    assert [(a["actor"], a["action"], a["item"]) for a in audit] == [
        ("peer:ann", "edit", fact),
        ("peer:ann", "delete", note),
    ]


async def test_a_correction_holding_a_secret_or_naming_no_item_is_refused(make_runtime):
    runtime = make_runtime({"identity": plugin})
    await say(runtime, "/remember my name is Ann")
    fact = ids(await say(runtime, "/correct"))["name: Ann"]
    assert "not stored: that holds a secret" in await say(runtime, f"/correct {fact} ghp_" + "a1B2c3D4e5" * 4)
    assert "is not an item id" in await say(runtime, "/correct name Anna")
    assert [f["object"] for f in backend_for(runtime).store.current_facts("default", "ann")] == ["Ann"]


def test_the_cli_lists_ids_then_edits_and_deletes(thoth_home, monkeypatch):
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "identity")
    group = ThothGroup(commands={"ask": ask, "identity": identity})
    group._plugins_loaded = True
    runner = CliRunner()

    def thoth(*args: str) -> str:
        result = runner.invoke(group, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    thoth("ask", "/remember I live in Oslo", "--peer", "ann")
    shown = thoth("identity", "show", "--peer", "ann")
    [fact] = re.findall(r"^  (f\d+) location: Oslo", shown, re.MULTILINE)
    assert "thoth identity edit ID TEXT" in shown
    assert thoth("identity", "edit", fact, "Bergen", "--peer", "ann").startswith("Corrected ann's location: Bergen")
    [current] = re.findall(r"^  (f\d+) location: Bergen", thoth("identity", "show", "--peer", "ann"), re.MULTILINE)
    assert thoth("identity", "delete", current, "--peer", "ann").startswith(f"Deleted ann's fact {current}")
    assert "location: Bergen" not in thoth("identity", "show", "--peer", "ann")
    refused = runner.invoke(group, ["identity", "delete", current, "--peer", "ann"])
    assert refused.exit_code == 2 and f"ann has no current fact {current}" in refused.output
