"""Facts as subject-predicate-object triples about the peer and the people and things it mentions."""

from __future__ import annotations

import json
import sqlite3

import pytest
from click.testing import CliRunner
from thoth_identity import plugin
from thoth_identity.backend import validate_export
from thoth_identity.cli import identity
from thoth_identity.derive import Derivation
from thoth_identity.graph import assert_fact, block_facts, mentioned, neighbourhood
from thoth_identity.migrations import MIGRATIONS
from thoth_identity.plugin import backend_for
from thoth_identity.render import user_model_block
from thoth_identity.store import IdentityStore

from thoth_core import ThothError
from thoth_core.budget import block_tokens
from thoth_core.cli import ThothGroup, ask
from thoth_core.storage import connect, migrate
from thoth_core.testing import context_for

FAMILY = json.dumps(
    {
        "observations": [{"content": "Ann worries about her sister", "kind": "deductive", "confidence": 0.7}],
        "facts": [
            {"predicate": "profession", "value": "pilot", "confidence": 0.95},  # an answer of the old shape
            {"subject": "", "predicate": "sister", "value": "Maria", "confidence": 0.95},
            {"subject": "Maria", "predicate": "lives in", "value": "Berlin", "confidence": 0.95},
            {"subject": "maria", "predicate": "dog", "object": "Rex", "confidence": 0.95},
            {"subject": "Rex", "predicate": "breed", "value": "beagle", "confidence": 0.95},
            {"subject": "Ann", "predicate": "likes", "value": "tea", "confidence": 0.95},  # her own name: the peer
            {"subject": "Maria", "predicate": "???", "value": "x", "confidence": 0.95},  # not a predicate: dropped
            {"subject": "M" * 101, "predicate": "age", "value": "40", "confidence": 0.95},  # too long: dropped
        ],
    }
)
RULES = [
    {"purpose": "derive", "match": "sister", "reply": FAMILY},
    {"purpose": "derive", "reply": '{"observations": [], "facts": []}'},
    {"reply": "ok"},
]


def user_model(assembly):
    return [b for b in assembly.blocks if b.tag == "user-model"]


def store_of(tmp_path):
    return IdentityStore(tmp_path / "identity.db")


def current(store, peer="ann"):
    return {(f["subject"], f["predicate"], f["object"]) for f in store.current_facts("w", peer)}


def fact(store, subject, predicate, value, peer="ann"):
    return assert_fact(store, "w", peer, subject=subject, predicate=predicate, value=value, confidence=1.0, source="t")


def test_a_new_value_supersedes_per_subject_and_predicate_with_history(tmp_path):
    store = store_of(tmp_path)
    store.set_fact("w", "ann", "location", "Oslo", confidence=1.0, source="t", at=100.0)
    store.set_fact("w", "ann", "location", "Berlin", confidence=1.0, source="t", subject="Maria", at=110.0)
    moved = store.set_fact("w", "ann", "location", "Paris", confidence=1.0, source="t", subject="Maria", at=120.0)
    assert [f["object"] for f in moved["superseded"]] == ["Berlin"]
    assert current(store) == {("ann", "location", "Oslo"), ("Maria", "location", "Paris")}  # ann's stays
    history = [(f["subject"], f["object"], f["valid_to"]) for f in store.fact_history("w", "ann")]
    assert ("Maria", "Berlin", 120.0) in history and ("Maria", "Paris", None) in history


def test_subjects_resolve_to_the_peer_or_the_spelling_already_stored(tmp_path):
    store = store_of(tmp_path)
    fact(store, None, "name", "Ann Lee")
    fact(store, "me", "profession", "pilot")
    fact(store, "ann lee", "likes", "tea")  # her name is the peer
    fact(store, "Maria", "city", "Berlin")
    fact(store, "MARIA", "city", "Rome")  # the same entity: supersedes
    assert current(store) == {
        ("ann", "name", "Ann Lee"),
        ("ann", "profession", "pilot"),
        ("ann", "likes", "tea"),
        ("Maria", "city", "Rome"),
    }


def test_entity_query_and_one_hop(tmp_path):
    store = store_of(tmp_path)
    fact(store, None, "sister", "Maria")
    fact(store, "Maria", "dog", "Rex")
    fact(store, "Rex", "breed", "beagle")
    fact(store, "Bob", "city", "Lima")  # not connected to Maria
    facts = store.current_facts("w", "ann")
    near = neighbourhood(facts, "ann", "maria")
    assert near["entity"] == "Maria"
    assert [(f["predicate"], f["object"]) for f in near["facts"]] == [("dog", "Rex")]
    assert [(f["subject"], f["predicate"]) for f in near["pointing"]] == [("ann", "sister")]
    assert {name: [f["object"] for f in rows] for name, rows in near["hops"].items()} == {
        "Rex": ["beagle"],
        "ann": ["Maria"],
    }
    assert "ann" not in neighbourhood(facts, "ann", "Maria", with_peer=False)["hops"]
    assert mentioned(facts, "ann", "Is rex OK? And Bob?") == ["Rex", "Bob"]
    assert mentioned(facts, "ann", "Bobby and Maximilian") == []  # whole words only


def test_the_block_carries_mentioned_entities_one_hop_within_budget(tmp_path):
    store = store_of(tmp_path)
    fact(store, None, "sister", "Maria")
    fact(store, "Maria", "dog", "Rex")
    fact(store, "Rex", "breed", "beagle")
    fact(store, "Bob", "city", "Lima")
    facts = store.current_facts("w", "ann")
    block = user_model_block("ann", facts=block_facts(facts, "ann", "How is Maria?"), budget=800)
    assert "- Maria, dog: Rex" in block.text and "- Rex, breed: beagle" in block.text
    assert "- sister: Maria" in block.text and "Lima" not in block.text
    assert "Facts about people and things in this message" in block.text
    plain = user_model_block("ann", facts=block_facts(facts, "ann", "What should I cook?"), budget=800)
    assert "Rex" not in plain.text and "Lima" not in plain.text and "- sister: Maria" in plain.text
    for many in range(40):
        fact(store, "Maria", f"trait_{many}", f"value number {many}")
    tight = user_model_block("ann", facts=block_facts(store.current_facts("w", "ann"), "ann", "Maria"), budget=120)
    assert block_tokens(tight) <= 120 and "Maria, " in tight.text


def test_a_store_of_the_previous_version_opens_with_its_facts_about_the_peer(tmp_path):
    path = tmp_path / "old.db"
    db = connect(path, rows=True)
    migrate(db, MIGRATIONS[:3])  # the schema the previous version made
    db.execute(
        "INSERT INTO facts (workspace, peer, subject, predicate, object, confidence, source, valid_from)"
        " VALUES ('w', 'ann', 'ann', 'name', 'Ann', 1.0, 't', 1.0), ('w', 'ann', '', 'city', 'Oslo', 1.0, 't', 2.0)"
    )
    db.commit()
    db.close()
    store = IdentityStore(path)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS) == 7
    assert current(store) == {("ann", "name", "Ann"), ("ann", "city", "Oslo")}
    assert {"facts_subject", "facts_object"} <= {
        row[0] for row in store.db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")
    }
    fact(store, "", "city", "Bergen")  # the migrated fact is superseded like any other
    assert ("ann", "city", "Bergen") in current(store) and ("ann", "city", "Oslo") not in current(store)


def test_the_derivation_schema_takes_triples_and_old_answers():
    answer = Derivation.model_validate_json(FAMILY)
    triples = [(f["subject"], f["predicate"], f["value"]) for f in answer.facts]
    assert triples == [
        ("", "profession", "pilot"),
        ("", "sister", "Maria"),
        ("Maria", "lives_in", "Berlin"),
        ("maria", "dog", "Rex"),
        ("Rex", "breed", "beagle"),
        ("Ann", "likes", "tea"),
    ]
    old = Derivation.model_validate({"facts": [{"predicate": "name", "value": "Ann", "confidence": 1}]})
    assert old.facts == [{"subject": "", "predicate": "name", "value": "Ann", "confidence": 1.0}]


async def test_derived_triples_reach_the_block_of_a_turn_that_names_them(make_runtime):
    runtime = make_runtime({"identity": plugin}, replies=RULES)
    await runtime.turn("My sister Maria moved to Berlin with her beagle Rex", peer="ann", thread="t1")
    await runtime.drain()
    store = backend_for(runtime).store
    held = {(f["subject"], f["predicate"], f["object"]) for f in store.current_facts("default", "ann")}
    assert held == {
        ("ann", "profession", "pilot"),
        ("ann", "sister", "Maria"),
        ("ann", "likes", "tea"),
        ("Maria", "lives_in", "Berlin"),
        ("Maria", "dog", "Rex"),
        ("Rex", "breed", "beagle"),
    }
    [block] = user_model(await context_for(runtime, "Rex is limping", peer="ann", thread="t2"))
    assert "- Rex, breed: beagle" in block.text and "- Maria, dog: Rex" in block.text  # Rex, then one hop
    assert "Maria, lives in: Berlin" in block.text
    [block] = user_model(await context_for(runtime, "Any news about work?", peer="ann", thread="t2"))
    assert "Rex" not in block.text and "- profession: pilot" in block.text


async def test_remember_states_facts_about_others_without_a_model(make_runtime):
    runtime = make_runtime({"identity": plugin})
    said = (await runtime.turn("/remember Maria's city is Berlin", peer="ann", thread="t")).reply.text
    assert said == "Remembered: Maria's city = Berlin"
    said = (await runtime.turn("/remember Maria's city is Rome", peer="ann", thread="t")).reply.text
    assert said == "Remembered: Maria's city = Rome (was: Berlin)"
    await runtime.turn("/remember my sister is Maria", peer="ann", thread="t")
    [block] = user_model(await context_for(runtime, "maria calls tonight", peer="ann", thread="t"))
    assert "- Maria, city: Rome" in block.text and "- sister: Maria" in block.text


def test_export_import_carries_subjects_and_reads_old_documents(tmp_path):
    store = store_of(tmp_path)
    fact(store, None, "sister", "Maria")
    fact(store, "Maria", "city", "Berlin")
    document = {"format": "thoth-identity/1", "peer": "ann", **store.export_rows("w", "ann")}
    assert {(f["subject"], f["object"]) for f in document["facts"]} == {("ann", "Maria"), ("Maria", "Berlin")}
    validate_export(document)
    assert store.import_rows("w", "bo", document) == {"facts": 2, "observations": 0, "messages": 0}
    assert current(store, "bo") == {("bo", "sister", "Maria"), ("Maria", "city", "Berlin")}
    assert store.import_rows("w", "bo", document)["facts"] == 0  # nothing twice
    old = {"format": "thoth-identity/1", "peer": "x", "facts": [{"predicate": "name", "object": "X", "valid_from": 1}]}
    validate_export(old)
    store.import_rows("w", "cy", old)
    assert current(store, "cy") == {("cy", "name", "X")}
    bad = {**old, "facts": [{"predicate": "Not A Slug", "object": "X", "valid_from": 1}]}
    with pytest.raises(ThothError, match=r"^facts\[0\]: predicate 'Not A Slug': expected a snake_case slug"):
        validate_export(bad)


def test_correcting_an_entity_fact_keeps_its_subject_and_history(make_runtime, tmp_path):
    from thoth_identity.corrections import correct, held_items

    runtime = make_runtime({"identity": plugin})
    store = backend_for(runtime).store
    fact(store, "Maria", "city", "Berlin", peer="ann")
    [item] = held_items(store, "w", "ann")
    assert item["text"] == "Maria, city: Berlin"
    said = correct(store, runtime, workspace="w", peer="ann", item=item["id"], text="Rome", actor="t")
    assert said == "Corrected Maria's city: Rome (the old value stays in its history)."
    assert current(store) == {("Maria", "city", "Rome")} and len(store.fact_history("w", "ann")) == 2


def test_an_unknown_subject_stays_out_of_the_peer_section(tmp_path):
    store = store_of(tmp_path)
    fact(store, "Maria", "city", "Berlin")
    block = user_model_block("ann", facts=block_facts(store.current_facts("w", "ann"), "ann", "hi"), budget=800)
    assert block is None  # Maria is not named: nothing about her, and ann has no facts
    raw = sqlite3.connect(tmp_path / "identity.db").execute("SELECT subject FROM facts").fetchall()
    assert raw == [("Maria",)]


def test_cli_entity_shows_facts_history_and_one_hop(thoth_home, monkeypatch):
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "identity")

    def thoth(*args):
        group = ThothGroup(commands={"ask": ask, "identity": identity})
        group._plugins_loaded = True
        result = CliRunner().invoke(group, list(args))
        return result.exit_code, result.output

    for text in ("my sister is Maria", "Maria's city is Berlin", "Maria's city is Rome", "Maria's dog is Rex"):
        thoth("ask", f"/remember {text}", "--peer", "ann")
    thoth("ask", "/remember Rex's breed is beagle", "--peer", "ann")
    code, shown = thoth("identity", "entity", "maria", "--peer", "ann")
    assert code == 0, shown
    lines = [line.split("  [")[0] for line in shown.splitlines()]
    assert lines[0] == "Maria (in ann's memory, default):"
    assert [line.split(" ", 3)[-1] for line in lines if line.startswith("  f")][:3] == [
        "city: Berlin",
        "city: Rome",
        "dog: Rex",
    ]
    assert "until" in shown and "Pointing at Maria:" in shown and "ann -sister-> Maria" in shown
    assert "One hop away: Rex" in shown and "breed: beagle" in shown and "One hop away: ann" in shown
    code, out = thoth("identity", "entity", "Nobody", "--peer", "ann")
    assert code == 2 and "ann's memory holds no fact about or pointing at 'Nobody'" in out
    code, shown = thoth("identity", "show", "--peer", "ann")
    assert "Maria, city: Rome  [from" in shown and "Rex, breed: beagle" in shown


async def test_honcho_backend_keeps_triples_locally_and_shows_them(make_runtime, honcho_server):
    table = {"base_url": honcho_server.url, "workspace": "test", "write_timeout": 1.0, "write_retries": 0}
    runtime = make_runtime({"identity": plugin}, config={"plugins": {"identity": table}})
    assert backend_for(runtime).name == "honcho"
    said = (await runtime.turn("/remember Maria's city is Berlin", peer="ann", thread="t")).reply.text
    assert said == "Remembered: Maria's city = Berlin"
    await runtime.drain()
    [block] = user_model(await context_for(runtime, "Maria visits soon", peer="ann", thread="t"))
    assert "- Maria, city: Berlin" in block.text
    assert ("Maria", "city", "Berlin") in {
        (f["subject"], f["predicate"], f["object"]) for f in backend_for(runtime).store.current_facts("default", "ann")
    }
