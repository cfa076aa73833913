"""Turns kept outside a home (`thoth_core.held`): one file per exit, taken once, forgotten without a trace."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from pathlib import Path

import pytest

from thoth_core import held
from thoth_core.journal import Entry
from thoth_core.types import Reply, Turn


def entry(text: str, peer: str = "ann", thread: str = "t") -> Entry:
    turn = Turn(text, peer, thread, extra={"missing_context": {"episodic": "timeout"}})
    return Entry(turn, Reply(f"re {text}", model="fake"), "s1", 1.5, ["working", "episodic"])


def test_an_entry_survives_the_file_as_the_journal_would_replay_it(tmp_path):
    home = tmp_path / "home"
    kept = [entry("one"), entry("two", peer="bob")]
    path = held.keep(home, kept)
    assert path.parent == tmp_path / "state" / "thoth" / "held" and path.name.startswith(held.home_key(home))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    taken: list[Entry] = []
    assert held.take(home, taken.append) == 2
    assert taken == kept
    assert held.files(home) == [] and not path.exists()
    assert held.take(home, taken.append) == 0  # taken once


def test_another_homes_turns_are_not_taken(tmp_path):
    held.keep(tmp_path / "a", [entry("of a")])
    assert held.take(tmp_path / "b", lambda e: None) == 0
    assert len(held.files(tmp_path / "a")) == 1


def test_a_journal_that_fails_midway_leaves_the_turns_it_did_not_take(tmp_path):
    home = tmp_path / "home"
    held.keep(home, [entry("one"), entry("two"), entry("three")])
    taken: list[str] = []

    def append(e: Entry) -> None:
        if len(taken) == 1:
            raise OSError(30, "Read-only file system")
        taken.append(e.turn.text)

    with pytest.raises(OSError):
        held.take(home, append)
    assert taken == ["one"]
    rest: list[Entry] = []
    assert held.take(home, rest.append) == 2
    assert [e.turn.text for e in rest] == ["two", "three"]


def test_a_file_another_runtime_is_taking_is_left_to_it(tmp_path):
    home = tmp_path / "home"
    (path,) = [held.keep(home, [entry("one")])]
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert held.take(home, lambda e: None) == 0
    finally:
        os.close(fd)
    assert held.take(home, lambda e: None) == 1


def test_forget_removes_a_peers_turns_or_a_threads_and_zeroes_what_it_removed(tmp_path):
    home = tmp_path / "home"
    first = held.keep(home, [entry("zqannone"), entry("zqanntwo", thread="u"), entry("zqbobone", peer="bob")])
    inode = os.open(first, os.O_RDONLY)  # the old file, as a reader of the disk would still find its blocks
    try:
        assert held.forget(home, workspace="default", peer="ann", thread="u") == 1
        assert os.pread(inode, 1 << 16, 0).strip(b"\0") == b""
    finally:
        os.close(inode)
    assert held.forget(home, workspace="default", peer="ann", thread=None) == 1
    assert held.forget(home, workspace="other", peer="bob", thread=None) == 0
    raw = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    assert b"zqann" not in raw and b"zqbobone" in raw
    assert held.forget(home, workspace="default", peer="bob", thread=None) == 1
    assert held.files(home) == []


def test_a_file_that_is_not_held_turns_is_left_for_a_person(tmp_path, caplog):
    home = tmp_path / "home"
    path = held.keep(home, [entry("one")])
    path.write_text("{not json")
    assert held.take(home, lambda e: None) == 0
    assert path.exists() and f"{path}: held turns that cannot be read are left there" in caplog.text


def test_without_a_state_folder_the_temp_dir_keeps_them_in_a_folder_of_this_user_only(tmp_path, monkeypatch):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the state folder would be")
    monkeypatch.setenv("XDG_STATE_HOME", str(blocked))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # the stdlib's documented override
    (tmp_path / "tmp").mkdir()
    path = held.keep(tmp_path / "home", [entry("one")])
    assert path.parent == tmp_path / "tmp" / f"thoth-held-{os.getuid()}"
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert len(held.files(tmp_path / "home")) == 1


def test_a_temp_folder_open_to_others_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "blocked"))
    (tmp_path / "blocked").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    other = tmp_path / f"thoth-held-{os.getuid()}"
    other.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(OSError, match="not a folder of this user only"):
        held.keep(tmp_path / "home", [entry("one")])
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_path_without_a_home_resolves_to_one_identity(tmp_path):
    assert held.home_key(tmp_path / "h") == held.home_key(tmp_path / "x" / ".." / "h")
    assert held.home_key(Path("relative")) == held.home_key(Path.cwd() / "relative")
