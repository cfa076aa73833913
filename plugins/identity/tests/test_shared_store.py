"""The identity store's contract on both dialects (an SQLite file, the shared PostgreSQL), and workers sharing one."""

from __future__ import annotations

import json
import multiprocessing
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from thoth_identity import bundle, plugin
from thoth_identity.corrections import correct, held_items
from thoth_identity.fake_honcho import FakeHoncho, free_port
from thoth_identity.graph import assert_fact, block_facts, neighbourhood
from thoth_identity.migrations import MIGRATIONS, POSTGRES
from thoth_identity.outbox import Outbox
from thoth_identity.plugin import backend_for
from thoth_identity.recall import recall_items
from thoth_identity.search import OBSERVATION_COLUMNS
from thoth_identity.store import IdentityStore

from thoth_core import ThothError
from thoth_core.config import Config
from thoth_core.testing import check_layer_plugin, context_for, make_test_runtime
from thoth_core.types import CUT_SHORT


@pytest.fixture
def storage(storage_config: dict[str, Any]) -> dict[str, Any]:
    """The config of each dialect (the kit's `storage_config`)."""
    return storage_config


@pytest.fixture
def store(storage: dict[str, Any], tmp_path: Path) -> Any:
    opened = IdentityStore(tmp_path / "identity" / "identity.db", Config(data=storage))
    yield opened
    opened.close()


def raw_rows(store: IdentityStore, sql: str) -> list[tuple[Any, ...]]:
    """Rows read past the store: the SQLite file through a new connection, or PostgreSQL through psycopg."""
    if store.db.dialect == "sqlite":
        import sqlite3

        with closing(sqlite3.connect(store.path)) as db:
            return db.execute(sql).fetchall()
    import psycopg

    with psycopg.connect(store.db.url, options="-c search_path=thoth_identity") as db:  # type: ignore[attr-defined]
        return db.execute(sql).fetchall()


def test_facts_supersede_with_history_and_multi_values_accumulate(store):
    first = store.set_fact("w", "ann", "profession", "nurse", confidence=1.0, source="t", at=100.0)
    second = store.set_fact("w", "ann", "profession", "surgeon", confidence=1.0, source="t", at=200.0)
    assert [f["object"] for f in second["superseded"]] == ["nurse"] and first["fact"]["id"] != second["fact"]["id"]
    history = [(f["object"], f["valid_from"], f["valid_to"]) for f in store.fact_history("w", "ann")]
    assert history == [("nurse", 100.0, 200.0), ("surgeon", 200.0, None)]
    assert store.set_fact("w", "ann", "profession", "Surgeon", confidence=1.0, source="t")["unchanged"]
    store.set_fact("w", "ann", "preference", "tea", confidence=0.9, source="t", multi_valued=True)
    store.set_fact("w", "ann", "preference", "dark mode", confidence=0.9, source="t", multi_valued=True)
    assert sorted(f["object"] for f in store.current_facts("w", "ann")) == ["dark mode", "surgeon", "tea"]
    assert store.counts("w", "ann") == {"observations": 0, "facts": 3, "fact_history": 4, "messages": 0, "withheld": 0}
    assert store.current_facts("w", "bob") == []


def test_observations_are_searched_for_one_peer_only_and_kept_once(store, make_runtime):
    for text in ("Ann sails a small boat on weekends", "Ann is allergic to peanuts", "Ann writes Rust at work"):
        store.add_observation("w", "ann", text, kind="explicit", author="deriver", confidence=0.8, source="t")
    store.add_observation("w", "bob", "Bob sails across the Atlantic", kind="x", author="d", confidence=1, source="t")
    store.add_observation("v", "ann", "Ann of elsewhere sails too", kind="x", author="d", confidence=1, source="t")
    assert (
        store.add_observation("w", "ann", "Ann is allergic to peanuts", kind="x", author="d", confidence=1, source="t")
        is None
    )
    found = store.search_observations("w", "ann", "any tips for sailing a boat this weekend?", limit=5)
    assert [o["content"] for o in found] == ["Ann sails a small boat on weekends"]
    assert set(found[0]) == {*OBSERVATION_COLUMNS.split(", "), "rank"}  # the same row in both dialects
    assert store.search_observations("w", "carol", "sailing boat", limit=5) == []
    [item] = recall_items(store, make_runtime().meaning, workspace="w", peer="ann", query="peanuts", limit=5)
    assert (item["kind"], item["text"]) == ("observation", "Ann is allergic to peanuts") and item["score"] > 0
    assert [o["content"] for o in store.recent_observations("w", "ann", limit=1)] == ["Ann writes Rust at work"]


def test_entity_triples_resolve_and_reach_one_hop(store):
    def fact(subject, predicate, value):
        return assert_fact(
            store, "w", "ann", subject=subject, predicate=predicate, value=value, confidence=1, source="t"
        )

    fact(None, "sister", "Maria")
    fact("Maria", "dog", "Rex")
    fact("MARIA", "city", "Berlin")
    fact("maria", "city", "Rome")  # the same entity: supersedes
    fact("Rex", "breed", "beagle")
    facts = store.current_facts("w", "ann")
    assert {(f["subject"], f["predicate"], f["object"]) for f in facts} == {
        ("ann", "sister", "Maria"),
        ("Maria", "dog", "Rex"),
        ("Maria", "city", "Rome"),
        ("Rex", "breed", "beagle"),
    }
    near = neighbourhood(facts, "ann", "maria")
    assert near["entity"] == "Maria" and {n: [f["object"] for f in rows] for n, rows in near["hops"].items()} == {
        "Rex": ["beagle"],
        "ann": ["Maria"],
    }
    assert {f["object"] for f in block_facts(facts, "ann", "How is Rex?")} == {"Maria", "beagle", "Rex", "Rome"}


async def test_corrections_edit_and_delete_and_stay_with_their_peer(make_runtime, storage):
    runtime = make_runtime({"identity": plugin}, config=storage)
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
    await runtime.turn("/remember I am training for the Bergen marathon", peer="ann", thread="t")
    store = backend_for(runtime).store
    held = {item["text"]: item["id"] for item in held_items(store, "default", "ann")}
    fact, note = held["name: Ann"], held["I am training for the Bergen marathon"]
    who = {"workspace": "default", "actor": "peer:ann"}
    with pytest.raises(ThothError, match=f"bob has no observation {note}"):
        correct(store, runtime, peer="bob", item=note, text=None, **who)
    assert correct(store, runtime, peer="ann", item=fact, text="Anna", **who).startswith("Corrected ann's name: Anna")
    assert correct(store, runtime, peer="ann", item=note, text=None, **who) == f"Deleted ann's observation {note}."
    assert [f["object"] for f in store.fact_history("default", "ann")] == ["Ann", "Anna"]
    assert [f["object"] for f in store.current_facts("default", "ann")] == ["Anna"]
    assert store.recent_observations("default", "ann", limit=5) == []
    assert raw_rows(store, "SELECT content FROM observations") == []
    if store.db.dialect == "postgres":  # every worker's corrections in one table
        audit = raw_rows(store, "SELECT actor, action, item FROM corrections ORDER BY id")
    else:
        lines = (runtime.home / "identity" / "corrections.jsonl").read_text().splitlines()
        audit = [(a["actor"], a["action"], a["item"]) for a in map(json.loads, lines)]
    assert audit == [("peer:ann", "edit", fact), ("peer:ann", "delete", note)]


def test_forget_deletes_from_the_store_and_scrubs_it(store):
    kept = store.add_message("w", "ann", thread="t2", session_id="s", turn_id="b", role="user", content="b")
    gone = store.add_message("w", "ann", thread="t1", session_id="s", turn_id="a", role="user", content="a")
    store.add_observation("w", "ann", "Ann keeps bees", kind="x", author="d", confidence=1, source="m", message_id=gone)
    store.set_fact("w", "ann", "hobby", "beekeeping", confidence=1.0, source=f"derived:message:{gone}")
    store.set_fact("w", "ann", "name", "Ann", confidence=1.0, source="t")
    store.cache_put("w", "ann", "dialectic", "Ann keeps bees")
    store.set_fact("w", "bob", "name", "Bob", confidence=1.0, source="t")
    assert store.delete("w", "ann", "t1") == {"facts": 1, "observations": 1, "messages": 1, "cached_answers": 1}
    assert [m["id"] for m in store.export_rows("w", "ann")["messages"]] == [kept]
    receipt = store.delete("w", "ann")
    assert receipt == {"facts": 1, "observations": 0, "messages": 1, "cached_answers": 0}
    assert raw_rows(store, "SELECT peer FROM facts") == [("bob",)]
    assert raw_rows(store, "SELECT count(*) FROM messages") == [(0,)]
    assert store.held_peers() == [("w", "bob")]
    if store.db.dialect == "postgres":  # the scrub vacuumed what the deletes left
        vacuumed = raw_rows(store, "SELECT relname FROM pg_stat_user_tables WHERE last_vacuum IS NOT NULL")
        assert {"facts", "observations", "messages"} <= {row[0] for row in vacuumed}
    else:
        assert b"bees" not in b"".join(p.read_bytes() for p in store.path.parent.iterdir() if p.is_file())


async def test_a_bundle_round_trip_restores_every_peer(make_runtime, storage):
    runtime = make_runtime({"identity": plugin}, config=storage)
    for peer, text in (("ann", "my name is Ann"), ("ann", "my name is Annie"), ("bob", "I live in Lima")):
        await runtime.turn(f"/remember {text}", peer=peer, thread="t")
    exported = bundle.bundle_export(runtime=runtime)
    section = {**exported, "records": list(exported["records"])}
    assert exported["count"] == 2
    for peer in ("ann", "bob"):
        await runtime.forget(peer=peer)
    assert backend_for(runtime).store.held_peers() == []
    totals = bundle.bundle_import(section=section, runtime=runtime, progress=lambda n: None)
    assert totals == {"peers": 2, "facts": 3, "observations": 0, "messages": 0}
    history = backend_for(runtime).store.fact_history("default", "ann")
    assert [(f["object"], f["valid_to"] is None) for f in history] == [("Ann", False), ("Annie", True)]
    assert bundle.bundle_import(section=section, runtime=runtime, progress=lambda n: None)["facts"] == 0


def test_a_failed_import_writes_nothing(store):
    bad = {
        "messages": [{"role": "user", "content": "hi", "at": 1.0}],
        "facts": [{"predicate": "x", "object": "y", "valid_from": [1]}],
    }
    with pytest.raises(store.db.errors):
        store.import_rows("w", "ann", bad)
    assert store.counts("w", "ann") == {"observations": 0, "facts": 0, "fact_history": 0, "messages": 0, "withheld": 0}


def test_migrations_bring_a_new_store_to_the_current_schema_once(store, storage, tmp_path):
    store.set_fact("w", "ann", "name", "Ann", confidence=1.0, source="t")
    again = IdentityStore(store.path, Config(data=storage))  # a second open finds nothing to do
    if store.db.dialect == "postgres":
        assert again.db.execute("SELECT version FROM thoth_schema_version").fetchall() == [(len(POSTGRES),)]
    else:
        assert again.db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert [f["object"] for f in again.current_facts("w", "ann")] == ["Ann"]
    again.close()


def _open_and_remember(path: str, url: str, peer: str) -> None:
    store = IdentityStore(Path(path), Config(data={"storage": {"url": url}} if url else {}))
    store.set_fact("w", peer, "name", peer.title(), confidence=1.0, source="t")
    store.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_three_processes_opening_an_empty_store_at_once_migrate_once(dialect, tmp_path, request):
    url = request.getfixturevalue("storage_url") if dialect == "postgres" else ""
    path = tmp_path / "identity" / "identity.db"
    spawn = multiprocessing.get_context("spawn")
    workers = [spawn.Process(target=_open_and_remember, args=(str(path), url, p)) for p in ("ann", "bob", "cy")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    store = IdentityStore(path, Config(data={"storage": {"url": url}} if url else {}))
    assert store.held_peers() == [("w", "ann"), ("w", "bob"), ("w", "cy")]
    if dialect == "postgres":
        assert store.db.execute("SELECT version FROM thoth_schema_version").fetchall() == [(len(POSTGRES),)]
    store.close()


async def test_two_workers_on_one_shared_store_see_each_others_facts_at_once(storage_url, tmp_path):
    config = {"storage": {"url": storage_url}}
    one = make_test_runtime(tmp_path / "one", {"identity": plugin}, config=config)
    two = make_test_runtime(tmp_path / "two", {"identity": plugin}, config=config)
    try:
        assert "Remembered" in (await one.turn("/remember my name is Ada", peer="ann", thread="t")).reply.text
        [block] = [b for b in (await context_for(two, "hello", peer="ann", thread="t")).blocks if b.tag == "user-model"]
        assert "name: Ada" in block.text
        await two.turn("/remember my name is Ida", peer="ann", thread="t")
        [block] = [b for b in (await context_for(one, "hello", peer="ann", thread="t")).blocks if b.tag == "user-model"]
        assert "name: Ida" in block.text and "Ada" not in block.text
        assert not (tmp_path / "one" / "identity" / "identity.db").exists()
    finally:
        for runtime in (one, two):
            await runtime.aclose()


def test_workers_draining_one_outbox_send_each_row_once_in_order(store, storage):
    workers = [Outbox(store)] + [Outbox(IdentityStore(store.path, Config(data=storage))) for _ in range(2)]
    for thread in ("t1", "t2", "t3"):
        for turn in range(4):
            messages = [(f"{thread}-{turn}", role, "text", float(turn)) for role in ("user", "assistant")]
            assert workers[0].put("w", "ann", thread, messages) == 2
    assert workers[0].put("w", "ann", "t1", [("t1-0", "user", "text", 0.0)]) == 0  # queued already
    claimed: list[tuple[str, list[int]]] = []
    guard = threading.Lock()

    def drain(outbox: Outbox) -> None:
        while rows := outbox.claim(limit=3):
            with guard:
                claimed.append((rows[0]["thread"], [row["id"] for row in rows]))
            outbox.sent(rows)

    threads = [threading.Thread(target=drain, args=(worker,)) for worker in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    ids = [i for _, batch in claimed for i in batch]
    assert len(ids) == len(set(ids)) == 24 and workers[0].waiting() == 0
    for thread in ("t1", "t2", "t3"):  # a thread's rows went out in order, whichever worker sent them
        in_thread = [i for name, batch in claimed if name == thread for i in batch]
        assert in_thread == sorted(in_thread) and len(in_thread) == 8
    assert store.sent("w", "ann", [f"t2-{turn}" for turn in range(4)]) == {f"t2-{turn}" for turn in range(4)}
    for worker in workers[1:]:
        worker.store.close()


def test_a_whole_reply_replaces_its_turns_cut_short_message_and_outbox_row_in_place(store):
    common = {"thread": "t", "session_id": "s", "turn_id": "turn1"}
    user = store.add_message("w", "ann", role="user", content="Plan my trip", **common)
    cut = store.add_message("w", "ann", role="assistant", content=f"Day one: Oslo\n{CUT_SHORT}", **common)
    assert store.add_message("w", "ann", role="assistant", content=CUT_SHORT, **common) == cut  # never by a cut one
    assert store.add_message("w", "ann", role="user", content="Plan my trip", **common) == user
    assert store.add_message("w", "ann", role="assistant", content="Oslo, then Bergen.", **common) == cut
    assert store.add_message("w", "ann", role="assistant", content="Another whole reply.", **common) == cut
    rows = store.export_rows("w", "ann")["messages"]
    assert [(m["id"], m["role"], m["content"]) for m in rows] == [
        (user, "user", "Plan my trip"),
        (cut, "assistant", "Oslo, then Bergen."),  # the first whole reply, in the cut-short one's place
    ]

    outbox = Outbox(store)

    def queue(turn_id: str, reply: str) -> int:
        return outbox.put("w", "ann", "t", [(turn_id, "user", "Plan my trip", 1.0), (turn_id, "assistant", reply, 2.0)])

    assert queue("turn2", f"Day one\n{CUT_SHORT}") == 2 and queue("turn3", f"Day one\n{CUT_SHORT}") == 2
    claimed = outbox.claim(limit=2)  # turn2's rows are being sent: they stay as they are
    assert [row["turn_id"] for row in claimed] == ["turn2", "turn2"]
    assert queue("turn2", "Oslo, then Bergen.") == 0
    assert queue("turn3", "Oslo, then Bergen.") == 1 and queue("turn3", CUT_SHORT) == 0
    assert queue("turn3", "Another whole reply.") == 0
    waiting = {(row["turn_id"], row["role"]): row["content"] for row in outbox.rows("w", "ann")}
    assert (
        waiting[("turn2", "assistant")].endswith(CUT_SHORT) and waiting[("turn3", "assistant")] == "Oslo, then Bergen."
    )
    assert len(waiting) == 4


async def test_the_conformance_kit_passes_on_both_dialects(make_runtime, storage):
    await check_layer_plugin(make_runtime({"identity": plugin}, config=storage), "identity")


async def test_a_worker_on_another_host_sends_what_one_left_in_the_shared_outbox(storage_url, tmp_path):
    server = FakeHoncho(port=free_port())  # down while the first worker serves the turn
    table = {"base_url": server.url, "workspace": "test", "write_timeout": 1.0, "write_retries": 0}
    config = {"storage": {"url": storage_url}, "plugins": {"identity": table}}
    one = make_test_runtime(tmp_path / "one", {"identity": plugin}, config=config)
    await one.turn("I keep bees", peer="ann", thread="t")
    await one.drain()
    await one.aclose()
    server.start()
    two = make_test_runtime(tmp_path / "two", {"identity": plugin}, config=config)
    try:
        backend = backend_for(two)  # starts by sending what waits
        backend.flush()
        assert [m["content"] for m in server.messages] == ["I keep bees", "ok"]
        assert backend.outbox.waiting() == 0
        assert backend.store.rows("SELECT peer, thread FROM honcho_sent") == [{"peer": "ann", "thread": "t"}]
    finally:
        await two.aclose()
        server.stop()
