"""The journal on a shared PostgreSQL: a dead worker's turns are replayed by another, once; a live one's never."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from thoth_core import hookimpl
from thoth_core.config import Config
from thoth_core.database import RESTART_GRACE_SECONDS
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime
from thoth_core.types import Reply, Session, Turn

WRITER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from thoth_core.config import Config
    from thoth_core.journal import TurnJournal
    from thoth_core.types import Reply, Session, Turn

    journal = TurnJournal(Path(sys.argv[2]) / "journal.db", Config(data={"storage": {"url": sys.argv[1]}}))
    turn = Turn("my cat is Miso", "ann", "t", id="turn-of-the-dead")
    journal.append(turn, Reply("Noted."), Session("default", "ann", "t", id="s-1", started_at=1.0), ["layer"])
    print(journal.writer, flush=True)
    time.sleep(120)  # replying to the next turn, or hung: the lock says it lives
    """
)


class Recorder:
    """A layer that records each post-turn write."""

    def __init__(self) -> None:
        self.written: list[str] = []

    @hookimpl
    async def post_turn_write(self, turn, reply, session):
        self.written.append(turn.id)


def shared(url: str) -> Config:
    return Config(data={"storage": {"url": url}})


def past_restart_grace(journal: TurnJournal) -> None:
    """Wait until the server has been up long enough for a free writer lock to mean a dead writer."""
    time.sleep(max(0.0, RESTART_GRACE_SECONDS - journal._db.uptime()))


def worker(home: Path, url: str, layer: Recorder):
    """A runtime of its own home (another host) on the shared store."""
    home.mkdir(parents=True, exist_ok=True)
    return make_test_runtime(home, {"layer": layer}, config={"storage": {"url": url}})


def test_a_live_writers_turn_is_not_taken_and_is_once_it_closed(tmp_path: Path, storage_url: str) -> None:
    live = TurnJournal(tmp_path / "a" / "journal.db", shared(storage_url))
    live.append(Turn("hello", "ann", "t", id="turn-1"), Reply("hi"), Session("default", "ann", "t"), ["layer"])
    other = TurnJournal(tmp_path / "b" / "journal.db", shared(storage_url))
    assert other.writer_alive(live.writer) and [e.turn.id for e in other.pending()] == ["turn-1"]
    assert other.pending(others_in_flight=False) == []  # its writer still holds its lock
    assert [e.turn.id for e in live.pending(others_in_flight=False)] == ["turn-1"]  # its own
    live.close()
    assert not other.writer_alive(live.writer)
    assert [e.turn.id for e in other.pending(others_in_flight=False)] == ["turn-1"]  # taken over
    third = TurnJournal(tmp_path / "c" / "journal.db", shared(storage_url))
    assert third.pending(others_in_flight=False) == []  # now `other`'s, and `other` lives
    other.close()
    third.close()
    assert not any((tmp_path / home).exists() for home in "abc")  # nothing of the journal in the homes


def _start_writer(url: str, home: Path) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, url, str(home)], stdout=subprocess.PIPE, text=True, env=dict(os.environ)
    )
    assert process.stdout is not None
    writer = process.stdout.readline().strip()
    assert writer, f"the writer process failed (exit {process.poll()})"
    return process, writer


async def test_a_killed_workers_turn_is_replayed_once_by_the_other_workers(tmp_path: Path, storage_url: str) -> None:
    process, writer = _start_writer(storage_url, tmp_path / "dead")
    layers = [Recorder(), Recorder()]
    workers = [worker(tmp_path / f"w{i}", storage_url, layer) for i, layer in enumerate(layers)]
    try:
        assert await workers[0].recover() == 0  # alive: its turn is its own
        assert workers[0].journal.writer_alive(writer)
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        deadline = time.monotonic() + 10
        while workers[0].journal.writer_alive(writer):  # the server ends the dead connection's session
            assert time.monotonic() < deadline, "the killed writer's lock was not released"
            await asyncio.sleep(0.05)
        past_restart_grace(workers[0].journal.remote)
        replayed = await asyncio.gather(*(w.recover() for w in workers))
        for w in workers:
            await w.drain()
        assert sorted(replayed) == [0, 1]
        assert sorted(turn for layer in layers for turn in layer.written) == ["turn-of-the-dead"]
        assert workers[0].journal.pending() == []
        assert sorted(await asyncio.gather(*(w.recover() for w in workers))) == [0, 0]
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for w in workers:
            await w.aclose()
    assert not (tmp_path / "dead" / "journal.db").exists()


async def test_a_replay_claims_only_the_dead_writers_rows_as_they_are(tmp_path: Path, storage_url: str) -> None:
    process, writer = _start_writer(storage_url, tmp_path / "dead")
    process.send_signal(signal.SIGKILL)
    process.wait(30)
    journal = TurnJournal(tmp_path / "journal.db", shared(storage_url))
    try:
        deadline = time.monotonic() + 10
        while journal.writer_alive(writer):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        past_restart_grace(journal)
        [entry] = journal.pending(others_in_flight=False)
        assert (entry.turn.text, entry.reply.text, entry.plugins, entry.session_id) == (
            "my cat is Miso",
            "Noted.",
            ["layer"],
            "s-1",
        )
        row = journal._db.execute("SELECT writer, writer_pid, plugins FROM pending").fetchone()
        assert (row[0], row[1], json.loads(row[2])) == (journal.writer, os.getpid(), ["layer"])
    finally:
        journal.close()
