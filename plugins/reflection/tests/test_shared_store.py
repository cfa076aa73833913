"""Reflection's store contract over both dialects (SQLite file, shared PostgreSQL), and several workers on one store."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection.documents import FileDocuments, StoredDocuments, documents
from thoth_reflection.importance import ARCHIVE_FILE, WEIGHTS_FILE
from thoth_reflection.reflect import records, reflect
from thoth_reflection.settings import state
from thoth_reflection.store import Store
from thoth_reflection.transient import StoredRecords, TransientRecords

from thoth_core import Session, ThothError
from thoth_core.config import Config
from thoth_core.testing import make_test_runtime

NOW = 1_772_402_400.0  # 2026-03-01 22:00 UTC
SOURCE = {"session": "s1", "run": "r1", "workspace": "default", "peer": "ann", "thread": "t1"}


@pytest.fixture
def storage(storage_config: dict[str, Any]) -> dict[str, Any]:
    """The config of each dialect (the kit's `storage_config`)."""
    return storage_config


@pytest.fixture
def store(storage: dict[str, Any], tmp_path: Path) -> Any:
    made = Store(tmp_path / "reflection.db", Config(data=storage))
    yield made
    made.close()


def other_store(storage: dict[str, Any], tmp_path: Path) -> Store:
    """A second process's view of the same store (another connection)."""
    return Store(tmp_path / "reflection.db", Config(data=storage))


def write_session(home: Path, *, at: float, session_id: str, user: str) -> None:
    """A finished one-turn transcript of ann's, where the working layer keeps them."""
    day = time.strftime("%Y-%m-%d", time.gmtime(at))
    path = home / "working" / "transcripts" / day / f"{session_id}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    base = {"session_id": session_id, "workspace": "default", "peer": "ann", "thread": "t"}
    rows = [
        dict(base, type="turn", at=at + 1, turn_id=f"{session_id}-1", user=user, assistant="ok"),
        dict(base, type="session_end", at=at + 2),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def add(store: Store, item_id: str, text: str = "Lead with the command.") -> None:
    store.add_item(item_id, kind="persona-observation", title=text, text=text, source=SOURCE, flags=["x"], payload={})


def test_the_dialect_follows_the_storage_url(store: Store, storage: dict[str, Any], tmp_path: Path) -> None:
    assert store.shared is bool(storage)
    assert (tmp_path / "reflection.db").exists() is not bool(storage)


def test_items_are_edited_while_pending_and_decided_once(store: Store, storage: dict, tmp_path: Path) -> None:
    add(store, "persona:a")
    other = other_store(storage, tmp_path)
    try:
        assert [i["id"] for i in other.pending()] == ["persona:a"]
        assert other.item("persona:a")["source"] == SOURCE and other.item("persona:a")["flags"] == ["x"]
        assert other.edit("persona:a", "Lead with the command, always.") is True
        assert store.item("persona:a")["text"] == "Lead with the command, always."
        assert store.settle("persona:a", "approved", actor="lead") is True
        assert other.settle("persona:a", "rejected", actor="bob") is False  # the loser changes nothing
        assert other.edit("persona:a", "changed") is False
        assert (store.item("persona:a")["status"], store.item("persona:a")["decided_by"]) == ("approved", "lead")
    finally:
        other.close()


def test_runs_marks_peers_and_check_ins_upsert_alike(store: Store, storage: dict, tmp_path: Path) -> None:
    session = Session("default", "ann", "t1", id="s1")
    store.start_run("r1", session)
    store.start_run("r2", session)  # the peer row is updated, not duplicated
    store.finish_run("r1", "ok")
    assert {r["run_id"]: r["status"] for r in store.runs("s1")} == {"r1": "ok", "r2": "running"}
    assert store.known_peers() == {"ann"}
    store.mark_reflected("s1", "turn-1", 1)
    store.mark_reflected("s1", "turn-3", 3)
    assert store.reflected("s1") == {"last_turn_id": "turn-3", "turns": 3}
    store.add_check_in("c1", at=10.5, text="How did it go?", session=session, run_id="r1")
    store.add_check_in("c1", at=11.5, text="How did the deploy go?", session=session, run_id="r1")
    other = other_store(storage, tmp_path)
    try:
        taken = [store.take_due_check_ins(20.0), other.take_due_check_ins(20.0)]
        assert [[c["text"] for c in t] for t in taken] == [["How did the deploy go?"], []]  # delivered once
        assert taken[0][0]["at"] == 11.5
        store.mark_consolidated(["session:a", "session:a", "record:b"], "session")
        other.mark_consolidated(["session:a"], "session")
        assert store.is_consolidated("session:a") and other.is_consolidated("record:b")
        assert not store.is_consolidated("session:c")
    finally:
        other.close()


def test_a_claim_is_held_by_one_until_released_or_lapsed(store: Store, storage: dict, tmp_path: Path) -> None:
    other = other_store(storage, tmp_path)
    try:
        assert store.claim("reflect:s1", seconds=60) is True
        assert other.claim("reflect:s1", seconds=60) is False
        store.release("reflect:s1")
        assert other.claim("reflect:s1", seconds=60) is True
        time.sleep(0.05)
        assert store.claim("reflect:s1", seconds=0.01) is True  # the holder died: its claim lapsed
    finally:
        other.close()


def test_forget_rows_delete_and_blank_in_both_dialects(store: Store) -> None:
    add(store, "persona:a")
    add(store, "knowledge:k", "a promoted note")
    store.audit("queued", {"item": "persona:a", "text": "secret"}, session_id="s1")
    store.audit("queued", {"item": "knowledge:k", "text": "secret too"})
    store.audit("queued", {"item": "knowledge:kk", "text": "kept"})
    store.add_check_in("c1", at=1.0, text="hi", session=Session("default", "ann", "t1", id="s1"), run_id="r1")
    scope = {"workspace": "default", "peer": "ann"}
    assert store.forget_rows(scope, sessions={"s1"}, items=["persona:a", "knowledge:k"], whole_peer=True) == (1, 2)
    assert store.all_items() == []
    assert [e["payload"] for e in store.audit_log()] == [{"forgotten": True}] * 2 + [
        {"item": "knowledge:kk", "text": "kept"}
    ]
    assert isinstance(store.db.scrub(tables=reflection.SCRUBBED), dict)


def test_documents_and_transient_records_live_in_the_shared_store(storage: dict, make_runtime: Any) -> None:
    runtime = make_runtime({"reflection": reflection}, config=storage)
    st = state(runtime)
    docs, folder = documents(st), records(st)
    assert isinstance(docs, StoredDocuments if storage else FileDocuments)
    assert isinstance(folder, StoredRecords if storage else TransientRecords)
    docs.write(WEIGHTS_FILE, "{}\n")
    docs.update(ARCHIVE_FILE, lambda text: (text or "") + "- [2026-01-01] gone <!-- peer:ann ws:default -->\n- kept\n")
    assert docs.forget(ARCHIVE_FILE, ("ann", "default")) == 1 and docs.read(ARCHIVE_FILE) == "- kept\n"
    first = folder.write("reflection", day="2026-01-01", session_id="s1", run_id="r1", text="# one")
    folder.write("validation", day="2026-01-02", session_id="s2", run_id="r2", text="# two")
    assert folder.put(first.id, "# other") is False and folder.get(first.id).text() == "# one"
    assert [r.id for r in folder.all()] == ["reflection/2026-01-01-s1-r1", "validation/2026-01-02-s2-r2"]
    assert folder.prune(now=time.time(), days=100_000, keep=set(), most=1) == [first.id]
    assert folder.delete_sessions({"s2"}) == 1 and folder.all() == []
    assert (st.dir / WEIGHTS_FILE).exists() is not bool(storage)  # shared: nothing left in the host's folder
    assert not (st.dir / "transient" / "reflection").exists() or not storage


async def test_approving_twice_applies_once_and_the_second_is_told(reflecting: Any, chat: Any, storage: dict) -> None:
    runtime, _ = reflecting(config={**storage, "thoth": {"founders": ["lead"]}})
    await chat(runtime, "hello")
    [item] = [i for i in await runtime.approvals(actor="lead") if i["id"].startswith("persona:")]
    outcomes = await asyncio.gather(
        *(runtime.decide(item["id"], "approve", actor="lead") for _ in range(3)), return_exceptions=True
    )
    assert sum(isinstance(o, dict) and o["status"] == "approved" for o in outcomes) == 1
    refused = [str(o) for o in outcomes if isinstance(o, Exception)]
    assert len(refused) == 2 and all(f"{item['id']} was already approved by lead" in r for r in refused)
    rules = (Path(runtime.config.root) / "persona" / "RULES.md").read_text()
    assert rules.count("Lead with the command, then explain.") == 1
    decisions = state(runtime).store.audit_log(event="decision")
    assert [d["payload"]["item"] for d in decisions] == [item["id"]]


async def test_an_item_drafted_on_one_runtime_is_decided_on_another(
    reflecting: Any, chat: Any, storage_url: str, tmp_path: Path
) -> None:
    shared = {"storage": {"url": storage_url}}
    runtime, _ = reflecting(config=shared)
    await chat(runtime, "hello")
    (tmp_path / "b").mkdir()
    config_b = {**shared, "thoth": {"owner": "bob"}}  # bob owns the second home and decides there
    other = make_test_runtime(tmp_path / "home-b", {"reflection": reflection}, config=config_b, root=tmp_path / "b")
    try:
        mine = sorted(i["id"] for i in await runtime.approvals(actor="lead") if i.get("plugin") == "reflection")
        theirs = sorted(i["id"] for i in await other.approvals(actor="bob"))  # `other` has no fake procedural layer
        assert theirs == mine and any(i.startswith("persona:") for i in theirs)
        persona = next(i for i in theirs if i.startswith("persona:"))
        assert (await other.decide(persona, "reject", actor="bob", reason="no"))["status"] == "rejected"
        with pytest.raises(ThothError, match=f"no pending item '{persona}'"):  # decided on the other host
            await runtime.decide(persona, "approve", actor="lead")
        assert not (tmp_path / "home-b" / "reflection" / "reflection.db").exists()
    finally:
        state(other).close()


async def test_two_workers_ending_one_session_reflect_on_it_once(
    reflecting: Any, storage_url: str, tmp_path: Path, good: dict
) -> None:
    shared = {"storage": {"url": storage_url}}
    runtime, _ = reflecting(config=shared)
    await runtime.turn("How do I deploy?", peer="ann", thread="t1")
    session = await runtime.session(peer="ann", thread="t1")
    replies = [{"purpose": "reflection", "reply": json.dumps(good)}, {"reply": "Sure."}]
    other = make_test_runtime(tmp_path / "home-b", {"reflection": reflection}, config=shared, replies=replies)
    try:
        results = await asyncio.gather(
            reflect(session, "idle", runtime=runtime), reflect(session, "idle", runtime=other)
        )
        assert sum(r is not None for r in results) == 1
        assert len(state(runtime).store.runs(session.id)) == 1
        assert len(state(other).store.audit_log(event="result")) == 1
    finally:
        state(other).close()


def _approve_after(barrier: Any, home: str, root: str, storage: dict, item_id: str, results: Any) -> None:
    """One worker process: a runtime on the store, waiting for the others, then approving the item."""
    from thoth_reflection import plugin
    from thoth_reflection.settings import state as state_of

    from thoth_core.testing import make_test_runtime as make

    runtime = make(Path(home), {"reflection": plugin}, config={**storage, "thoth": {"owner": "lead"}}, root=Path(root))
    state_of(runtime)  # opened (and migrated) before the race starts
    barrier.wait(60)
    try:
        results.put(asyncio.run(runtime.decide(item_id, "approve", actor="lead"))["message"])
    except ThothError as exc:
        results.put(f"refused: {exc}")
    finally:
        state_of(runtime).close()


def seed(home: Path, storage: dict, item_id: str, text: str) -> None:
    """Queue one persona observation in the store a runtime with this home and storage opens."""
    made = Store(home / "reflection" / "reflection.db", Config(data=storage))
    add(made, item_id, text)
    made.close()


def test_worker_processes_approving_one_item_at_once_apply_it_once(storage: dict, tmp_path: Path) -> None:
    import multiprocessing

    home, root, text = tmp_path / "home", tmp_path / "agent", "Answer with the command first."
    root.mkdir()
    seed(home, storage, "persona:race", text)
    spawn = multiprocessing.get_context("spawn")
    barrier, results = spawn.Barrier(3), spawn.Queue()
    args = (barrier, str(home), str(root), storage, "persona:race", results)
    workers = [spawn.Process(target=_approve_after, args=args) for _ in range(3)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [w.exitcode for w in workers] == [0, 0, 0]
    said = sorted(results.get(timeout=5) for _ in workers)
    assert said[0].startswith("approved persona:race: persona/RULES.md"), said
    late = ("persona:race was already approved by lead", "no pending item 'persona:race'")  # raced, or came after
    assert all(s.startswith("refused: ") and s.endswith(late) for s in said[1:]), said
    assert (root / "persona" / "RULES.md").read_text().count(text) == 1


def test_two_thoth_review_approve_processes_one_succeeds_the_other_says_already(storage: dict, tmp_path: Path) -> None:
    import threading

    from thoth_core.approvals import os_user
    from thoth_core.testing import run_thoth

    project, home = tmp_path / "agent", tmp_path / "home"
    url = storage.get("storage", {}).get("url")
    env = {"THOTH_HOME": str(home), "THOTH_CONFIG": None, "THOTH_LOAD_PLUGINS": "reflection", "THOTH_STORAGE_URL": url}
    made = run_thoth("init", str(project), env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    seed(home, storage, "persona:cli", "Say which environment first.")
    done: list[Any] = []

    def approve() -> None:
        done.append(run_thoth("review", "approve", "persona:cli", env=env, cwd=project))  # as the home's owner

    runs = [threading.Thread(target=approve) for _ in range(2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    won = [r for r in done if r.returncode == 0]
    lost = [r for r in done if r.returncode != 0]
    assert len(won) == 1 and won[0].stdout.startswith("approved persona:cli"), [(r.stdout, r.stderr) for r in done]
    assert len(lost) == 1 and lost[0].returncode == 2
    [error] = [line for line in lost[0].stderr.splitlines() if line.startswith("thoth: error: ")]  # the core logs too
    assert error.endswith((f"persona:cli was already approved by {os_user()}", "no pending item 'persona:cli'"))
    rules = next(project.rglob("RULES.md")).read_text()
    assert rules.count("Say which environment first.") == 1


async def test_nightly_keeps_weights_and_archive_in_the_store_and_runs_once(
    storage: dict, make_runtime: Any, thoth_home: Path
) -> None:
    from thoth_reflection.memory import MemoryFile
    from thoth_reflection.nightly import run_nightly

    config = {"thoth": {"model": ""}, **storage, "plugins": {"reflection": {"snapshot_tokens": 40}}}
    runtime = make_runtime({"reflection": reflection}, config=config)
    st = state(runtime)
    MemoryFile(st.path(st.settings.memory_file)).replace_section("snapshot", "- [2025-05-01] Production is Postgres.")
    for n in range(4):
        write_session(thoth_home, at=NOW - 86400 * (n + 1), session_id=f"c{n}", user=f"Lunch chat {n}: soup.")
    other = other_store(storage, st.dir)
    try:
        assert other.claim("nightly", seconds=60)  # another worker is in the middle of it
        skipped = await run_nightly(runtime, now=NOW)
        assert skipped["changed"] is False and "another worker" in skipped["skipped"]
        other.release("nightly")
        summary = await run_nightly(runtime, now=NOW)
    finally:
        other.close()
    assert summary["changed"] and summary["removed"] >= 1
    docs = documents(st)
    assert "Lunch chat" in (docs.read(ARCHIVE_FILE) or "") and json.loads(docs.read(WEIGHTS_FILE) or "")
    assert summary["archive"] == docs.where(ARCHIVE_FILE)
    assert (st.dir / ARCHIVE_FILE).exists() is not bool(storage)
    receipt = await runtime.forget(peer="ann")
    assert receipt["reflection"]["archived memory lines"] >= 1 and "Lunch chat" not in (docs.read(ARCHIVE_FILE) or "")


async def test_forget_erases_the_peer_from_the_shared_store(reflecting: Any, chat: Any, storage_url: str) -> None:
    import psycopg

    runtime, _ = reflecting(config={"storage": {"url": storage_url}})
    await chat(runtime, "My badge number is 4471.", peer="ann")
    st = state(runtime)
    assert st.store.all_items() and records(st).all()
    receipt = await runtime.forget(peer="ann")
    assert receipt["reflection"]["queued items"] >= 1 and receipt["reflection"]["transient records"] == 1
    with psycopg.connect(storage_url) as db:
        db.execute("SET search_path = thoth_reflection")
        assert db.execute("SELECT count(*) FROM items").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM transient").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM audit WHERE payload LIKE '%Lead with the command%'").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM peers WHERE peer = 'ann'").fetchone()[0] == 0
        vacuumed = db.execute(
            "SELECT relname FROM pg_stat_user_tables WHERE schemaname = 'thoth_reflection' AND last_vacuum IS NOT NULL"
        ).fetchall()
    assert {"items", "audit", "check_ins"} <= {row[0] for row in vacuumed}  # the scrub ran


async def test_a_bundle_moves_reflection_from_sqlite_into_the_shared_store(
    reflecting: Any, chat: Any, storage_url: str, tmp_path: Path
) -> None:
    from thoth_reflection.bundle import TABLES, bundle_export, bundle_import

    source, _ = reflecting()
    await chat(source, "hello")
    documents(state(source)).write(WEIGHTS_FILE, '{"ab12": {"kind": "note", "seen": 2}}\n')
    section = bundle_export(source)
    section["records"] = list(section["records"])
    target = make_test_runtime(
        tmp_path / "home-b", {"reflection": reflection}, config={"storage": {"url": storage_url}}
    )
    try:
        added = bundle_import(section, target, lambda _n: None)
        assert added["items"] >= 1 and added["transient records"] == 1 and added["nightly files"] == 1
        assert bundle_import(section, target, lambda _n: None) == {}  # a second import adds nothing
        before, after = state(source).store, state(target).store
        for table in TABLES:
            order = "SELECT * FROM {} ORDER BY " + ("id" if table == "audit" else "1")
            mine = [{k: v for k, v in r.items() if k != "id"} for r in before.query(order.format(table))]
            theirs = [{k: v for k, v in r.items() if k != "id"} for r in after.query(order.format(table))]
            assert theirs == mine, table
        assert [r.text() for r in records(state(target)).all()] == [r.text() for r in records(state(source)).all()]
        assert documents(state(target)).read(WEIGHTS_FILE) == documents(state(source)).read(WEIGHTS_FILE)
    finally:
        state(target).close()
