"""One open session per thread, whichever process opens it: real `thoth ask` processes started at once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from thoth_working import plugin as working
from thoth_working.store import SessionStore

from thoth_core import Session
from thoth_core.config import Config

ASKS = 8


@pytest.fixture(params=["sqlite", "postgres"])
def storage_env(request: pytest.FixtureRequest) -> dict[str, str]:
    """The environment naming the store: SQLite files in the home, or the shared PostgreSQL."""
    if request.param == "sqlite":
        return {}
    return {"THOTH_STORAGE_URL": request.getfixturevalue("storage_url")}


def store_of(home: Path, storage_env: dict[str, str]) -> SessionStore:
    url = storage_env.get("THOTH_STORAGE_URL")
    return SessionStore(home / "working", Config(data={"storage": {"url": url}} if url else {}))


def thoth_command() -> list[str]:
    script = Path(sys.executable).with_name("thoth")
    return [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]


def test_first_turns_started_at_once_share_one_session(thoth_env, thoth_home, fake_anthropic, storage_env):
    fake_anthropic.replies = ["Noted."]
    env = {
        **os.environ,
        **storage_env,
        "THOTH_LOAD_PLUGINS": "working,anthropic",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": "test-key",
    }
    asks = [
        subprocess.Popen(
            [*thoth_command(), "ask", f"message {n}", "--peer", "same", "--thread", "one"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(ASKS)
    ]
    outcomes = [ask.communicate(timeout=120) for ask in asks]
    assert [ask.returncode for ask in asks] == [0] * ASKS, [err for _, err in outcomes]
    assert all("Noted." in out for out, _ in outcomes)
    store = store_of(thoth_home, storage_env)
    try:
        [session] = [s for s in store.every() if (s.peer, s.thread) == ("same", "one")]
        assert session.closed is None and session.turns == ASKS
        said = sorted(e["user"] for e in store.entries(session.session_id, session.started_at) if e["type"] == "turn")
        assert said == sorted(f"message {n}" for n in range(ASKS))
    finally:
        store.close()


async def test_a_thread_reopened_after_its_idle_limit_sets_the_old_session_aside_for_the_reaper(make_runtime):
    config = {"thoth": {"idle_minutes": 30}}
    first = make_runtime({"working": working}, config=config)
    old = (await first.turn("one", peer="ann", thread="t")).session
    await first.drain()
    store = working.state(first).store
    store._db.execute("UPDATE sessions SET last_active = last_active - 3600 WHERE session_id = ?", (old.id,))
    second = make_runtime({"working": working}, config=config)
    fresh = await second.session(peer="ann", thread="t")
    opened = [s for s in store.every() if s.thread == "t" and s.closed is None]
    assert [s.session_id for s in opened] == [fresh.id] and store.get(old.id).closed == "expired"
    [reaped] = await second.reap_idle()
    await second.drain()
    assert reaped.id == old.id and store.get(old.id).closed == "idle" and store.get(fresh.id).closed is None


async def test_replayed_turns_of_sessions_that_never_got_a_row_join_the_threads_open_session(make_runtime):
    runtime = make_runtime({"working": working})
    store = working.state(runtime).store
    for n in range(3):  # three processes whose session could not be indexed (a full disk), each with one turn
        stand_in = Session("default", "ann", "t", runtime=runtime, started_at=time.time())
        stand_in.transcript.append({"type": "turn", "turn_id": f"turn-{n}", "at": time.time(), "user": f"u{n}"})
        stand_in.scratch["thoth.replay"] = True
        store.flush(stand_in)
    [session] = [s for s in store.every() if s.thread == "t"]
    said = [e["user"] for e in store.entries(session.session_id, session.started_at) if e["type"] == "turn"]
    assert said == ["u0", "u1", "u2"] and session.turns == 3 and session.closed is None


async def test_a_session_without_a_row_takes_the_thread_over_when_it_can_write_again(make_runtime):
    runtime = make_runtime({"working": working})
    store = working.state(runtime).store
    other = (await runtime.turn("one", peer="ann", thread="t")).session
    await runtime.drain()
    unindexed = Session("default", "ann", "t", runtime=runtime)  # its start could not write its row
    unindexed.transcript.append({"type": "turn", "turn_id": "late", "at": time.time(), "user": "two"})
    store.flush(unindexed)
    assert store.get(unindexed.id).closed is None and store.get(other.id).closed == "expired"
    assert [s.session_id for s in store.every() if s.closed is None] == [unindexed.id]


async def test_an_imported_open_session_of_a_thread_open_here_comes_in_closed(make_runtime, tmp_path):
    from thoth_core.testing import make_test_runtime

    elsewhere = make_test_runtime(tmp_path / "elsewhere", {"working": working})
    here = make_runtime({"working": working})
    try:
        theirs = (await elsewhere.turn("from there", peer="ann", thread="t")).session
        ours = (await here.turn("from here", peer="ann", thread="t")).session
        await elsewhere.drain()
        await here.drain()
        section = working.bundle_export(runtime=elsewhere)
        section["records"] = list(section["records"])
        assert working.bundle_import(section=section, runtime=here, progress=lambda _n: None)["sessions"] == 1
        store = working.state(here).store
        assert store.get(theirs.id).closed == "superseded" and store.get(ours.id).closed is None
        assert [e["user"] for e in store.entries(theirs.id, theirs.started_at) if e["type"] == "turn"] == ["from there"]
    finally:
        await elsewhere.aclose()


def test_an_index_with_split_threads_keeps_the_latest_open_and_sets_the_others_aside(tmp_path, storage_env):
    from thoth_working.store import MIGRATIONS, POSTGRES

    from thoth_core.database import open_database

    url = storage_env.get("THOTH_STORAGE_URL")
    config = Config(data={"storage": {"url": url}} if url else {})
    old = open_database(
        config, "working", path=tmp_path / "sessions.db", migrations=MIGRATIONS[:2], postgres=POSTGRES[:1]
    )
    for session_id, last_active in [("a", 3.0), ("b", 5.0), ("c", 4.0)]:  # a thread split by concurrent first turns
        old.execute(
            "INSERT INTO sessions (session_id, workspace, peer, thread, started_at, last_active, turns, agent)"
            " VALUES (?, 'default', 'ann', 't', 1.0, ?, 1, 'default')",
            (session_id, last_active),
        )
    old.close()
    store = SessionStore(tmp_path, config)
    try:
        assert {s.session_id: s.closed for s in store.every()} == {"a": "expired", "b": None, "c": "expired"}
        assert sorted(s.session_id for s in store.claim_idle(0.0, held=set())) == ["a", "c"]  # reaped, reflected
    finally:
        store.close()
