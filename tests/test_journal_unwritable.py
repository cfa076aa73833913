"""A read-only data folder or a full disk: the turn is held in memory, and the same runtime journals and writes it
once it can; a runtime that closes first keeps it outside the home (`held.py`) for the next start.

The folder is made read-only for real: as root (where chmod stops nothing) by a read-only bind
mount of the folder onto itself, undone by unmounting it; otherwise by taking the write bits
away. Files opened before keep their descriptors (on the writable mount), so what fails is what
opens a path: SQLite's rollback journal, a transcript file, a new file. The full disk is a 2 MB
tmpfs (mounting needs root) filled with zeros, then emptied again.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from thoth_core import hookimpl
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime, run_thoth
from thoth_core.writes import unsaved_message

pytestmark = pytest.mark.slow  # spawns thoth processes

pytest.importorskip("thoth_working")


class Switch:
    """Makes a folder read-only and writable again."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.mounted = False

    def read_only(self) -> None:
        if os.geteuid() == 0:
            folder = str(self.folder)
            bind = subprocess.run(["mount", "--bind", folder, folder], capture_output=True)
            if bind.returncode:
                pytest.skip(f"cannot bind-mount as root here: {bind.stderr.decode().strip()}")
            self.mounted = True
            subprocess.run(["mount", "-o", "remount,bind,ro", folder, folder], check=True, capture_output=True)
        else:
            for path in [self.folder, *self.folder.rglob("*")]:
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        with pytest.raises(OSError):
            (self.folder / "probe").write_text("x")  # it really is read-only

    def writable(self) -> None:
        if self.mounted:
            subprocess.run(["umount", str(self.folder)], check=True, capture_output=True)
            self.mounted = False
        else:
            for path in [self.folder, *self.folder.rglob("*")]:
                path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def switch(tmp_path) -> Iterator[Switch]:
    home = tmp_path / "home"
    home.mkdir()
    made = Switch(home)
    try:
        yield made
    finally:
        made.writable()


class FileLayer:
    """A layer that appends each turn to a file in the home (so it fails while the folder is read-only)."""

    def __init__(self, home: Path) -> None:
        self.path = home / "layer.txt"

    @hookimpl
    def post_turn_write(self, turn, reply, session):
        with self.path.open("a") as file:
            file.write(f"{turn.text} -> {reply.text}\n")

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []


def runtime_at(home: Path):
    import thoth_working.plugin

    layer = FileLayer(home)
    runtime = make_test_runtime(home, {"working": thoth_working.plugin, "layer": layer}, replies=[{"reply": "Noted."}])
    return runtime, layer


def transcript_users(home: Path) -> list[str]:
    lines = [json.loads(line) for path in home.rglob("*.jsonl") for line in path.read_text().splitlines() if line]
    return [entry["user"] for entry in lines if entry.get("type") == "turn"]


def pending_on_disk(home: Path) -> list[str]:
    journal = TurnJournal(home / "journal.db")
    try:
        return [entry.turn.text for entry in journal.pending()]
    finally:
        journal.close()


async def wait_until(check, seconds: float = 15.0) -> None:
    import asyncio

    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not written in time"
        await asyncio.sleep(0.1)


async def test_the_same_runtime_writes_the_turn_in_the_background_once_the_folder_is_writable(switch):
    home = switch.folder
    runtime, layer = runtime_at(home)
    await runtime.turn("before it broke", peer="ann", thread="t")
    await runtime.drain()
    switch.read_only()
    result = await runtime.turn("my bike is the green one", peer="ann", thread="t")
    assert result.reply.text == "Noted."  # the reply still goes out
    await runtime.drain()
    (unsaved,) = runtime.unsaved
    assert set(unsaved["failed"]) == {"journal", "working", "layer"}, unsaved
    assert "Read-only file system" in unsaved["failed"]["layer"]
    assert layer.lines() == ["before it broke -> Noted."]
    switch.writable()
    await wait_until(lambda: len(layer.lines()) == 2)  # no new turn: the background retry writes it
    await runtime.drain()
    assert layer.lines()[1] == "my bike is the green one -> Noted."
    assert transcript_users(home) == ["before it broke", "my bike is the green one"]
    assert pending_on_disk(home) == [] and runtime.writes.owed == {} and runtime.unsaved == []
    await runtime.aclose()


async def test_a_new_turn_retries_at_once_and_the_journal_keeps_it_until_every_layer_has_it(switch):
    home = switch.folder
    runtime, layer = runtime_at(home)
    switch.read_only()  # from the first turn: the journal file cannot even be made
    await runtime.turn("written while read-only", peer="ann", thread="t")
    await runtime.drain()
    assert "journal" in runtime.unsaved[0]["failed"]
    switch.writable()
    await runtime.turn("the next turn", peer="ann", thread="t")  # retries what is owed, now
    await runtime.drain()
    await wait_until(lambda: len(layer.lines()) == 2, seconds=5)
    assert sorted(layer.lines()) == ["the next turn -> Noted.", "written while read-only -> Noted."]
    assert transcript_users(home) == ["written while read-only", "the next turn"]
    assert pending_on_disk(home) == []
    await runtime.aclose()


TOKEN = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"  # split: the source holds no whole token


def held_files(tmp_path: Path) -> list[Path]:
    """The files of held turns under the test's XDG_STATE_HOME (set by `thoth_env`)."""
    folder = Path(os.environ["XDG_STATE_HOME"]) / "thoth" / "held"
    assert folder.parent.parent == tmp_path / "state"  # hermetic: never the real user's state folder
    return sorted(folder.glob("*.json")) if folder.exists() else []


async def test_what_only_memory_holds_at_exit_is_kept_outside_the_home_and_the_next_start_writes_it(
    switch, tmp_path, caplog
):
    home = switch.folder
    runtime, layer = runtime_at(home)
    switch.read_only()
    result = await runtime.turn(f"my token is {TOKEN}", peer="ann", thread="t")
    await runtime.drain()
    with caplog.at_level(logging.WARNING, logger="thoth_core.writes"):
        await runtime.aclose()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "thoth_core.writes" and "at exit" in r.getMessage()]
    (spill,) = held_files(tmp_path)
    assert f"kept in {spill} until the home can be written" in line and "ann/t" in line and "\n" not in line, line
    assert runtime.writes.kept_at == spill and runtime.writes.lost is None
    assert stat.S_IMODE(spill.stat().st_mode) == 0o600
    assert stat.S_IMODE(spill.parent.stat().st_mode) == 0o700
    raw = spill.read_text()
    assert TOKEN not in raw and "[REDACTED:github-token]" in raw  # redacted as the journal keeps it
    assert result.turn.id in raw
    assert layer.lines() == [] and transcript_users(home) == []

    switch.writable()
    later, layer = runtime_at(home)
    await later.turn("back again", peer="bob", thread="u")  # its first session replays the journal
    await later.drain()
    await wait_until(lambda: len(layer.lines()) == 2, seconds=5)
    assert sorted(layer.lines()) == ["back again -> Noted.", "my token is [REDACTED:github-token] -> Noted."]
    assert sorted(transcript_users(home)) == ["back again", "my token is [REDACTED:github-token]"]
    assert held_files(tmp_path) == [] and pending_on_disk(home) == []
    await later.aclose()


async def test_a_turn_that_cannot_be_kept_anywhere_at_exit_is_said_lost(switch, tmp_path, caplog, monkeypatch):
    home = switch.folder
    runtime, _ = runtime_at(home)
    switch.read_only()
    monkeypatch.setenv("XDG_STATE_HOME", str(home / "state"))  # inside the read-only folder
    monkeypatch.setattr(tempfile, "tempdir", str(home))  # the stdlib's documented override of gettempdir()
    await runtime.turn("lost with the process", peer="ann", thread="t")
    await runtime.drain()
    with caplog.at_level(logging.WARNING, logger="thoth_core.writes"):
        await runtime.aclose()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "thoth_core.writes" and "at exit" in r.getMessage()]
    assert "1 lost: never journaled" in line and "nor kept outside the home" in line and "ann/t" in line, line
    assert "Read-only file system" in runtime.writes.lost and runtime.writes.kept_at is None
    message = unsaved_message(runtime.unsaved[0]["failed"], lost=runtime.writes.lost)
    assert message.endswith(": lost.") and "nor could it be kept outside the home" in message


async def test_forget_removes_a_peers_turns_kept_outside_the_home_and_spares_the_others(switch, tmp_path):
    home = switch.folder
    runtime, _ = runtime_at(home)
    switch.read_only()
    await runtime.turn("zqannsecret about ann", peer="ann", thread="t")
    await runtime.turn("zqbobwords about bob", peer="bob", thread="t")
    await runtime.drain()
    await runtime.aclose()
    (spill,) = held_files(tmp_path)
    assert "zqannsecret" in spill.read_text()
    switch.writable()
    later, layer = runtime_at(home)
    receipt = await later.forget(peer="ann")
    assert receipt["journal"] == {"unwritten turns": 1}
    state = tmp_path / "state"
    assert not any(b"zqannsecret" in path.read_bytes() for path in state.rglob("*") if path.is_file())
    assert "zqbobwords" in held_files(tmp_path)[0].read_text()
    await later.recover()
    await later.drain()
    assert layer.lines() == ["zqbobwords about bob -> Noted."] and held_files(tmp_path) == []
    await later.aclose()


def test_thoth_ask_on_a_read_only_home_says_where_the_turn_is_kept_and_the_next_ask_writes_it(switch, tmp_path):
    home = switch.folder
    (tmp_path / "thoth.toml").write_text('[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "Noted." }]\n')
    env = {"THOTH_HOME": str(home), "THOTH_LOAD_PLUGINS": "working"}
    first = run_thoth("ask", "hello", "--peer", "ann", cwd=tmp_path, env=env)  # makes the home's files
    assert first.returncode == 0, first.stderr
    switch.read_only()
    stuck = run_thoth("ask", "kept while read-only", "--peer", "ann", cwd=tmp_path, env=env)
    assert stuck.returncode == 3 and stuck.stdout == "Noted.\n", stuck.stderr
    (spill,) = held_files(tmp_path)
    assert f"the journal could not keep it either: kept in {spill} until the home can be written" in stuck.stderr
    switch.writable()
    later = run_thoth("ask", "and now", "--peer", "ann", cwd=tmp_path, env=env)
    assert later.returncode == 0, later.stderr
    assert transcript_users(home) == ["hello", "kept while read-only", "and now"]
    assert held_files(tmp_path) == [] and pending_on_disk(home) == []


@pytest.fixture
def small_disk(tmp_path) -> Iterator[Path]:
    """A 2 MB tmpfs (needs the right to mount; skipped without it)."""
    folder = tmp_path / "small"
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def fill(folder: Path) -> Path:
    """Write zeros until the disk is full; returns the file to delete to make room again."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as file:
        try:
            while True:
                file.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


async def test_on_a_full_disk_the_same_runtime_journals_and_writes_the_turn_once_there_is_room(small_disk):
    runtime, layer = runtime_at(small_disk)
    filler = fill(small_disk)  # before the first turn: the journal file cannot even be made
    result = await runtime.turn("kept through a full disk", peer="ann", thread="t")
    assert result.reply.text == "Noted."
    await runtime.drain()
    (unsaved,) = runtime.unsaved
    assert "journal" in unsaved["failed"] and "No space left" in unsaved["failed"]["layer"], unsaved
    assert runtime.writes.owed[result.turn.id].unjournaled
    filler.unlink()
    await wait_until(lambda: layer.lines() == ["kept through a full disk -> Noted."])
    await runtime.drain()
    assert transcript_users(small_disk) == ["kept through a full disk"]
    assert pending_on_disk(small_disk) == [] and runtime.writes.owed == {} and runtime.unsaved == []
    await runtime.aclose()


async def test_a_layer_that_keeps_failing_is_left_to_the_next_start_after_the_last_retry(tmp_path, monkeypatch):
    import thoth_core.writes

    monkeypatch.setattr(thoth_core.writes, "RETRY_FIRST", 0.01)  # the project's own pacing constants, not an SDK
    monkeypatch.setattr(thoth_core.writes, "RETRY_TRIES", 3)
    calls = []

    class Broken:
        @hookimpl
        def post_turn_write(self, turn):
            calls.append(turn.id)
            raise OSError(5, "Input/output error")

    runtime = make_test_runtime(tmp_path, {"broken": Broken()}, replies=[{"reply": "Noted."}])
    result = await runtime.turn("a turn", peer="ann", thread="t")
    await wait_until(lambda: len(calls) == 4 and not runtime.writes.owed, seconds=5)  # the write, then 3 retries
    await runtime.drain()
    (entry,) = runtime.journal.pending()
    assert (entry.turn.id, entry.plugins, entry.attempts) == (result.turn.id, ["broken"], 4)
    assert len(runtime.unsaved) == 1  # told once, not at each retry
    await runtime.aclose()
