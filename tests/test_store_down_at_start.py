"""PostgreSQL stopped before a process starts: it answers its turns within their deadline, keeps the writes in a
local journal and, once the server answers, the same process writes them to every layer (its stores made then)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from thoth_core import hookimpl
from thoth_core.config import Config
from thoth_core.database import OPEN_SECONDS, StoreDown, circuit, open_database
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime, run_thoth
from thoth_core.testing.postgres import outage, start_server, stop_server

pytestmark = pytest.mark.slow  # spawns thoth processes

KEPT_LOCALLY = "turns are kept locally until it answers"
LAYERS = "working,identity,episodic,procedural,reflection,blackboard,mcp"
DEADLINE = 2.0
NOTES = ["CREATE TABLE notes (turn_id TEXT PRIMARY KEY, text TEXT NOT NULL)"]


class Notes:
    """A layer keeping each turn in the shared store."""

    def __init__(self, config: Config, home: Path) -> None:
        self.db = open_database(config, "notes", path=home / "notes.db", migrations=NOTES, postgres=NOTES)

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


async def test_a_runtime_started_in_an_outage_answers_and_writes_its_turns_once_the_server_is_back(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    home = tmp_path / "home"
    config = {"storage": {"url": storage_url}, "thoth": {"deadline": DEADLINE}}
    stop_server(pg_server)
    try:
        started = time.monotonic()
        runtime = make_test_runtime(home, {}, config=config, replies=[{"reply": "noted"}])
        notes = Notes(runtime.config, home)  # its schema cannot be made yet: made before its first statement
        runtime.register(notes, name="notes")
        assert time.monotonic() - started < OPEN_SECONDS  # it did not wait for a first connection
        assert circuit(storage_url).down is not None
        took = []
        for text in ("one", "two", "three"):
            began = time.monotonic()
            result = await runtime.turn(text, peer="ann", thread="t")
            took.append(time.monotonic() - began)
            assert result.reply.text == "noted"
        assert max(took) < DEADLINE + 1.0, took
        await asyncio.sleep(0.1)
        assert [e.turn.text for e in TurnJournal(home / "journal.db").pending()] == ["one", "two", "three"]
        with pytest.raises(StoreDown):
            notes.db.execute("SELECT 1")
    finally:
        start_server(pg_server)
    try:
        await _until(lambda: len(notes.texts()) == 3, 15, "the runtime did not write the waiting turns")
        assert notes.texts() == ["one / noted", "three / noted", "two / noted"]
        await _until(lambda: not TurnJournal(home / "journal.db").pending(), 5, "the local journal kept them")
        await _until(lambda: runtime.journal.writer_lock_held, 5, "the writer lock was not taken")
        await runtime.turn("four", peer="ann", thread="t")
        await runtime.drain()
        assert "four / noted" in notes.texts()
    finally:
        notes.db.close()
        await runtime.aclose()


def _home(tmp_path: Path, storage_url: str) -> tuple[Path, dict[str, str | None]]:
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "replay"\n\n[models.replay]\nrules = [{ reply = "noted" }]\n\n'
        f'[storage]\nurl = "{storage_url}"\n'
    )
    return tmp_path, {"THOTH_LOAD_PLUGINS": LAYERS, "THOTH_STORAGE_URL": None}


def test_thoth_ask_in_an_outage_replies_with_one_warning_and_every_layer_has_the_turn_after(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    home, env = _home(tmp_path, storage_url)
    with outage(pg_server):
        started = time.monotonic()
        down = run_thoth("ask", "--peer", "ann", "--thread", "t", "while down", cwd=home, env=env)
        took = time.monotonic() - started
        doctor = run_thoth("doctor", cwd=home, env=env)
    assert down.stdout.strip() == "noted" and down.returncode == 3, down.stderr  # 3: shown, not saved everywhere yet
    assert took < 15, took  # one process start and a turn, no pool waiting for the server
    assert [line for line in down.stderr.splitlines() if KEPT_LOCALLY in line] == [
        next(line for line in down.stderr.splitlines() if "thoth_core.database" in line)
    ]
    assert doctor.returncode != 0
    assert "BAD storage: the shared PostgreSQL does not answer" in doctor.stdout
    back = run_thoth("ask", "--peer", "ann", "--thread", "t", "once back", cwd=home, env=env)
    assert back.returncode == 0 and back.stdout.strip() == "noted", back.stderr
    with psycopg.connect(storage_url) as db:
        for text in ("while down", "once back"):
            held = [db.execute(f"SELECT count(*) FROM {at}", (value,)).fetchone()[0] for at, value in kept_where(text)]
            assert held == [1, 1, 1], text  # an episode, the identity layer's user message, a transcript entry


def kept_where(text: str) -> list[tuple[str, str]]:
    """Where each layer keeps a turn's user text (a query's table and condition, and its parameter)."""
    return [
        ("thoth_episodic.thoth_episodes WHERE user_text = %s", text),
        ("thoth_identity.messages WHERE role = 'user' AND content = %s", text),
        ("thoth_working.transcript_entries WHERE entry LIKE %s", f"%{json.dumps(text)}%"),
    ]


def test_a_slack_ledger_opened_in_an_outage_answers_requests_rather_than_dropping_them(
    tmp_path: Path, storage_url: str, pg_server: Any
) -> None:
    from thoth_slack.outbound import Ledger

    with outage(pg_server):
        ledger = Ledger(tmp_path / "ledger.db", config=Config(data={"storage": {"url": storage_url}}))
        try:
            assert ledger.first_time("event-1")
        finally:
            ledger.close()
