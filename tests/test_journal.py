"""The turn journal: a replied turn is on disk until every plugin has written it, and replayed after a crash."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest

from thoth_core import hookimpl
from thoth_core.config import Config
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime, run_thoth
from thoth_core.types import CUT_SHORT, Reply, Session, Turn

pytestmark = pytest.mark.slow  # spawns thoth processes


class Recorder:
    """A layer that records each post-turn write, and can be made to fail or to wait."""

    def __init__(self, *, fail: bool = False, gate: asyncio.Event | None = None) -> None:
        self.written: list[tuple[str, str, str]] = []
        self.fail = fail
        self.gate = gate

    @hookimpl
    async def post_turn_write(self, turn, reply, session):
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise OSError(28, "No space left on device")
        self.written.append((turn.id, reply.text, session.id))


@pytest.fixture
def storage(storage_config):
    """The `[storage]` table of each dialect: none (the journal file in the home), or a fresh shared PostgreSQL."""
    return storage_config.get("storage", {})


def runtime_with(home, storage=None, **plugins):
    config = {"storage": storage} if storage else None
    return make_test_runtime(home, plugins, config=config, replies=[{"reply": "Noted."}])


def journal_at(home, storage):
    return TurnJournal(home / "journal.db", Config(data={"storage": storage}) if storage else None)


async def test_the_turn_is_journaled_before_the_writes_and_struck_off_after(tmp_path, storage):
    gate = asyncio.Event()
    layer = Recorder(gate=gate)
    runtime = runtime_with(tmp_path, storage, layer=layer)
    result = await runtime.turn("remember the tea", peer="ann", thread="t")
    other = journal_at(tmp_path, storage)
    pending = other.pending()  # another connection: it is on disk
    other.close()
    assert [(e.turn.id, e.turn.text, e.reply.text, e.plugins) for e in pending] == [
        (result.turn.id, "remember the tea", "Noted.", ["layer"])
    ]
    gate.set()
    await runtime.drain()
    assert layer.written == [(result.turn.id, "Noted.", result.session.id)]
    assert runtime.journal.pending() == [] and runtime.unsaved == []
    await runtime.aclose()


async def test_a_killed_process_leaves_the_turn_and_the_next_start_writes_it_to_whoever_missed_it(tmp_path, storage):
    journal = journal_at(tmp_path, storage)
    turn = Turn("my cat is Miso", "ann", "t", id="turn-1")
    session = Session("default", "ann", "t", id="session-1", started_at=1.0)
    journal.append(turn, Reply("Noted.", model="replay"), session, ["early", "late"])
    journal.settle("turn-1", done=["early"], failed={})  # `early` wrote it; then the process died
    journal.close()

    early, late = Recorder(), Recorder()
    runtime = runtime_with(tmp_path, storage, early=early, late=late)
    await runtime.session(peer="bob", thread="x")  # the first session of a process replays the journal
    await runtime.drain()
    assert early.written == []
    assert late.written == [("turn-1", "Noted.", "session-1")]
    assert runtime.journal.pending() == []
    await runtime.aclose()


async def test_a_failing_layer_is_reported_keeps_the_turn_and_gets_it_at_the_next_start(tmp_path, storage):
    notices = []

    class Frontend:
        @hookimpl
        def notify(self, event, payload):
            notices.append((event, payload))

    failing, fine = Recorder(fail=True), Recorder()
    runtime = runtime_with(tmp_path, storage, failing=failing, fine=fine, frontend=Frontend())
    result = await runtime.turn("hello", peer="ann", thread="t")
    await runtime.drain()
    assert [u["failed"] for u in runtime.unsaved] == [{"failing": "OSError: [Errno 28] No space left on device"}]
    assert ("turn_unsaved", runtime.unsaved[0]) in notices
    (entry,) = runtime.journal.pending()
    assert entry.plugins == ["failing"] and entry.attempts == 1 and "No space left" in entry.error
    await runtime.aclose()

    recovered = Recorder()
    again = runtime_with(tmp_path, storage, failing=recovered, fine=fine)
    assert await again.recover() == 1
    await again.drain()
    assert recovered.written == [(result.turn.id, "Noted.", result.session.id)]
    assert len(fine.written) == 1  # `fine` had it already: not written twice
    assert again.journal.pending() == []
    await again.aclose()


async def test_forget_erases_the_peers_journaled_turns(tmp_path, storage):
    runtime = runtime_with(tmp_path, storage, failing=Recorder(fail=True))
    await runtime.turn("ann's secret plan", peer="ann", thread="t")
    await runtime.turn("bob's plan", peer="bob", thread="t")
    await runtime.drain()
    receipt = await runtime.forget(peer="ann")
    assert receipt["journal"] == {"unwritten turns": 1}
    assert [e.turn.peer for e in runtime.journal.pending()] == ["bob"]
    if storage:
        assert not list(tmp_path.glob("journal.db*"))  # the shared store holds the journal
        rows = runtime.journal.remote._db.execute("SELECT turn FROM pending").fetchall()
        assert len(rows) == 1 and "bob's plan" in rows[0][0]
    await runtime.aclose()
    if not storage:
        raw = b"".join(p.read_bytes() for p in tmp_path.glob("journal.db*"))
        assert b"secret plan" not in raw and b"bob's plan" in raw


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs (needs the right to mount; skipped without it)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder):
    """Write zeros until the disk is full; returns the file to delete to make room again."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as file:
        try:
            while True:
                file.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_on_a_full_disk_the_journal_keeps_the_turn_and_the_next_start_writes_it(tmp_path, small_disk):
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "replay"\nhome = "{small_disk}"\n[models.replay]\nrules = [{{ reply = "Noted." }}]\n'
    )
    env = {"THOTH_HOME": None, "THOTH_LOAD_PLUGINS": "working,procedural,episodic"}
    assert run_thoth("ask", "first turn", "--peer", "ann", cwd=tmp_path, env=env).returncode == 0
    filler = fill(small_disk)
    long_turn = "the turn on a full disk " + "and its many words " * 2000  # more pages than one turn freed
    full = run_thoth("ask", long_turn, "--peer", "ann", cwd=tmp_path, env=env)
    assert full.returncode == 3 and full.stdout == "Noted.\n", full.stderr
    assert "kept in the journal and retried at the next start" in full.stderr.splitlines()[-1]
    filler.unlink()
    assert run_thoth("context", "x", "--peer", "bob", cwd=tmp_path, env=env).returncode == 0
    episodes = run_thoth("episodes", "list", "--peer", "ann", "--json", cwd=tmp_path, env=env).stdout
    assert "the turn on a full disk" in episodes and "first turn" in episodes
    assert TurnJournal(small_disk / "journal.db").pending() == []


def test_a_replay_leaves_the_turns_another_live_process_is_still_writing(tmp_path):
    journal = TurnJournal(tmp_path / "journal.db")
    session = Session("default", "ann", "t")
    for turn_id, pid in (("live", 1), ("dead", _finished_pid()), ("mine", None)):
        journal.append(Turn(turn_id, "ann", "t", id=turn_id), Reply("ok"), session, ["layer"])
        if pid is not None:
            journal._db.execute("UPDATE pending SET writer_pid=? WHERE turn_id=?", (pid, turn_id))
    assert [e.turn.id for e in journal.pending()] == ["live", "dead", "mine"]
    assert [e.turn.id for e in journal.pending(others_in_flight=False)] == ["dead", "mine"]  # pid 1 is alive
    journal.close()


def _finished_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


class JournalPeek:
    """A model whose reply is what the journal (read on another connection) holds when it is called."""

    name = "peek"

    def __init__(self, home, storage) -> None:
        self.home, self.storage = home, storage

    @hookimpl
    def register_models(self, register):
        register("peek", lambda runtime, options: self)

    async def stream(self, request):
        other = journal_at(self.home, self.storage)
        held = [(e.turn.text, e.reply.text, e.reply.cut_short) for e in other.pending()]
        other.close()
        yield json.dumps(held)


async def test_the_message_is_journaled_before_the_model_is_called(tmp_path, storage):
    config = {"thoth": {"model": "peek"}} | ({"storage": storage} if storage else {})
    runtime = make_test_runtime(tmp_path, {"peek": JournalPeek(tmp_path, storage), "layer": Recorder()}, config=config)
    result = await runtime.turn("remember the tea", peer="ann", thread="t")
    assert json.loads(result.reply.text) == [["remember the tea", CUT_SHORT, True]]
    await runtime.drain()
    assert runtime.journal.pending() == []  # the whole reply replaced it, and every layer wrote it
    await runtime.aclose()
