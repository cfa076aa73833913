"""PostgreSQL stopped under a running runtime: turns reply within their deadline, the writes wait in a local
journal, and once the server is back the same runtime writes them to every layer and holds its writer lock again."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from thoth_core import hookimpl
from thoth_core.config import Config
from thoth_core.database import POOL_WAIT_SECONDS, RESTART_GRACE_SECONDS, StoreDown, circuit, open_database
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime
from thoth_core.testing.postgres import outage, start_server, stop_server
from thoth_core.types import ContextBlock, Reply, Session, Turn

SQLITE = ["CREATE TABLE notes (turn_id TEXT PRIMARY KEY, text TEXT NOT NULL)"]
POSTGRES = SQLITE
DEADLINE = 2.0


class Notes:
    """A layer keeping each turn in the shared store, and reading from it before each turn."""

    def __init__(self, config: Config, home: Path) -> None:
        self.db = open_database(config, "notes", path=home / "notes.db", migrations=SQLITE, postgres=POSTGRES)

    @hookimpl
    def pre_spawn_context(self, turn: Any, session: Any) -> ContextBlock:
        count = self.db.execute("SELECT count(*) FROM notes").fetchone()[0]
        return ContextBlock("notes", f"{count} notes")

    @hookimpl
    def post_turn_write(self, turn: Any, reply: Any, session: Any) -> None:
        self.db.execute(
            "INSERT INTO notes VALUES (?, ?) ON CONFLICT (turn_id) DO NOTHING", (turn.id, f"{turn.text} / {reply.text}")
        )

    def texts(self) -> list[str]:
        return sorted(row[0] for row in self.db.execute("SELECT text FROM notes"))


async def _until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except StoreDown:  # the probe has not found the server up yet
            pass
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_turns_in_an_outage_reply_in_time_and_are_written_by_the_same_runtime_once_it_is_back(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    config = {"storage": {"url": storage_url}, "thoth": {"deadline": DEADLINE}}
    runtime = make_test_runtime(tmp_path / "home", {}, config=config, replies=[{"reply": "noted"}])
    notes = Notes(runtime.config, tmp_path / "home")
    runtime.register(notes, name="notes")
    try:
        await runtime.turn("before", peer="ann", thread="t")
        await runtime.drain()
        assert notes.texts() == ["before / noted"]
        journal = runtime.journal
        assert journal.writer_lock_held and not (tmp_path / "home" / "journal.db").exists()
        with outage(pg_server):
            took = []
            for text in ("one", "two", "three"):
                started = time.monotonic()
                result = await runtime.turn(text, peer="ann", thread="t")
                took.append(time.monotonic() - started)
                assert result.reply.text == "noted"
            assert max(took) < DEADLINE + 1.0, took  # no pool timeout: the first probe fails at once
            assert max(took[1:]) < POOL_WAIT_SECONDS, took  # then the circuit answers: no turn waits for the pool
            await asyncio.sleep(0.1)
            assert [e.turn.text for e in TurnJournal(tmp_path / "home" / "journal.db").pending()] == [
                "one",
                "two",
                "three",
            ]  # kept in the home while the server is away
            with pytest.raises(StoreDown):
                notes.db.execute("SELECT 1")
        back = time.monotonic()
        await _until(lambda: len(notes.texts()) == 4, 15, "the runtime did not write the waiting turns")
        assert time.monotonic() - back < 3.0  # once the probe finds it up, not at a retry's later pause
        assert notes.texts() == ["before / noted", "one / noted", "three / noted", "two / noted"]
        await _until(lambda: not TurnJournal(tmp_path / "home" / "journal.db").pending(), 5, "local journal kept")
        await _until(lambda: journal.writer_lock_held, 5, "the writer lock was not taken again")
        assert journal.remote is not None and journal.remote.pending(others_in_flight=False) == []
    finally:
        notes.db.close()
        await runtime.aclose()


def test_a_restart_frees_the_writer_lock_only_until_its_holder_takes_it_again(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    config = Config(data={"storage": {"url": storage_url}})
    live = TurnJournal(tmp_path / "a" / "journal.db", config)
    other = TurnJournal(tmp_path / "b" / "journal.db", config)
    try:
        stop_server(pg_server)
        start_server(pg_server)
        assert other._db.uptime() < RESTART_GRACE_SECONDS
        deadline = time.monotonic() + 10
        while not (live.writer_lock_held and other.writer_alive(live.writer)):
            assert time.monotonic() < deadline, "the live writer did not take its lock again"
            time.sleep(0.05)
        assert other.writer_alive(live.writer) and live.writer_lock_held
    finally:
        live.close()
        other.close()
    assert circuit(storage_url).down is None


def test_within_the_restart_grace_a_dead_writer_of_this_host_loses_its_turns_at_once(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    """A free lock may be a live writer still re-taking it; a writer whose pid is gone on this host is dead."""
    config = Config(data={"storage": {"url": storage_url}})
    claimer = TurnJournal(tmp_path / "a" / "journal.db", config)
    try:
        child = subprocess.Popen(["true"])
        child.wait()
        dead_pid = child.pid
        writers = {"turn-dead": f"{socket.gethostname()}:{dead_pid}:0000", "turn-elsewhere": "otherhost:1:0000"}
        for turn_id, writer in writers.items():
            claimer.append(Turn("hi", "ann", "t", id=turn_id), Reply("hello"), Session("default", "ann", "t"), ["x"])
            claimer._db.execute("UPDATE pending SET writer=? WHERE turn_id=?", (writer, turn_id))
        stop_server(pg_server)
        start_server(pg_server)
        assert claimer._db.uptime() < RESTART_GRACE_SECONDS
        assert [entry.turn.id for entry in claimer.pending(others_in_flight=False)] == ["turn-dead"]
    finally:
        claimer.close()
