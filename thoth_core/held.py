"""Turns a home could not keep, kept outside it until it can: one file per exit, taken by the next runtime.

When the data folder is read-only or full at exit, the turns only memory holds (`writes.TurnWriter`)
are written here rather than lost: one JSON file per exiting process, in `$XDG_STATE_HOME/thoth/held/`
(default `~/.local/state/thoth/held/`), else in `thoth-held-<uid>` in the temp dir; named by the
home's identity (a hash of its resolved path), written atomically, mode 0600. The turns are as the
journal keeps them (redacted). The next runtime of that home takes them into its journal (`take`)
and replays them; forget removes a peer's (or a thread's) turns from them (`forget`). What leaves a
file (taken, forgotten) is overwritten with zeros, as its file is replaced or removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .journal import Entry

logger = logging.getLogger(__name__)

VERSION = 1
STALE_TEMP_SECONDS = 60  # a temp file this old is a crash's leftover, not a write in flight


def folders() -> list[Path]:
    """Where held turns are kept, in the order tried: the user's state folder, then the temp dir."""
    found = []
    state = os.environ.get("XDG_STATE_HOME", "")
    if state and Path(state).is_absolute():
        found.append(Path(state) / "thoth" / "held")
    else:
        with contextlib.suppress(RuntimeError, KeyError):  # no home directory for this user
            found.append(Path.home() / ".local" / "state" / "thoth" / "held")
    found.append(Path(tempfile.gettempdir()) / f"thoth-held-{os.getuid()}")
    return found


def home_key(home: Path) -> str:
    """The identity of a home in file names: a hash of its resolved path."""
    return hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:24]


def files(home: Path) -> list[Path]:
    """The held-turn files of a home, oldest first."""
    key = home_key(home)
    found = [path for folder in folders() if _ours(folder) for path in folder.glob(f"{key}-*.json")]
    return sorted(found, key=lambda path: path.name)


def keep(home: Path, entries: list[Entry]) -> Path:
    """Write these turns to a new file of the home; its path. Raises OSError when no folder takes it."""
    data = {"version": VERSION, "home": str(home.resolve()), "pid": os.getpid(), "written_at": time.time()}
    text = json.dumps(data | {"turns": [entry.record() for entry in entries]}, default=str)
    name = f"{home_key(home)}-{time.time_ns():020d}-{os.getpid()}.json"  # sorts oldest first
    errors = []
    for folder in folders():
        try:
            _make(folder)
            _write(folder / name, text)
        except OSError as exc:
            errors.append(f"{folder}: {exc.strerror or exc}")
            continue
        return folder / name
    raise OSError("; ".join(errors))


def take(home: Path, append: Callable[[Entry], object]) -> int:
    """Give each held turn of a home to `append` (the journal), oldest first; how many it took.

    A file whose turns were all taken is removed; when `append` fails (the journal cannot write
    yet: the next start tries again), the turns not taken stay and the error is raised. A file
    another runtime is taking now is left to it; one that cannot be read is left for a person.
    """
    taken = 0
    for path in files(home):
        try:
            with _locked(path, wait=False) as held:
                if held is None:
                    continue
                records, fd = held
                done = 0
                try:
                    for record in records:
                        append(Entry.from_record(record))
                        done += 1
                finally:
                    taken += done
                    if done:
                        _rewrite(path, fd, records[done:])
        except (ValueError, KeyError, TypeError) as exc:
            logger.error("%s: held turns that cannot be read are left there: %s", path, exc)
    return taken


def forget(home: Path, *, workspace: str, peer: str, thread: str | None) -> int:
    """Remove a peer's held turns (or one thread's) from every file of the home; how many.

    Temp files a crash left (a write never renamed into place) go too: they may hold the same turns.
    """
    removed = 0
    for path in files(home):
        with _locked(path, wait=True) as held:
            if held is None:
                continue
            records, fd = held
            left = [record for record in records if not _owned(record, workspace, peer, thread)]
            if len(left) < len(records):
                removed += len(records) - len(left)
                _rewrite(path, fd, left)
    for folder in folders():
        for temp in folder.glob(f".{home_key(home)}-*.tmp") if _ours(folder) else []:
            with contextlib.suppress(OSError):
                if time.time() - temp.stat().st_mtime > STALE_TEMP_SECONDS:
                    _shred(temp)
    return removed


def _owned(record: dict[str, Any], workspace: str, peer: str, thread: str | None) -> bool:
    turn = record.get("turn") or {}
    return (turn.get("workspace"), turn.get("peer")) == (workspace, peer) and thread in (None, turn.get("thread"))


@contextlib.contextmanager
def _locked(path: Path, *, wait: bool) -> Iterator[tuple[list[dict[str, Any]], int] | None]:
    """A held file's turns and its descriptor, locked; None when it is gone or (without `wait`) locked by another.

    With `wait`, a file replaced while this waited for its lock is locked again as it is now.
    """
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
        except FileNotFoundError:
            yield None
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield None
                return
            try:
                same = os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                yield _read(path, fd), fd
                return
            if not wait:  # removed or replaced by the runtime that held the lock: its turns are its own
                yield None
                return
        finally:
            os.close(fd)


def _read(path: Path, fd: int) -> list[dict[str, Any]]:
    """The turns of a held file (raises ValueError naming it when it is not one)."""
    raw = os.pread(fd, os.fstat(fd).st_size, 0)
    try:
        data = json.loads(raw)
        turns = data["turns"]
        if not isinstance(turns, list):
            raise TypeError("turns is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: not a file of held turns: {exc}") from exc
    return turns


def _rewrite(path: Path, fd: int, records: list[dict[str, Any]]) -> None:
    """Replace a held file (open as `fd`) by one of these turns, or remove it; its old bytes are zeroed."""
    if records:
        data = json.loads(os.pread(fd, os.fstat(fd).st_size, 0))
        _write(path, json.dumps(data | {"turns": records}, default=str))
    else:
        path.unlink(missing_ok=True)
    size = os.fstat(fd).st_size  # the old file: no longer linked, still open
    os.pwrite(fd, b"\0" * size, 0)
    os.fsync(fd)


def _write(path: Path, text: str) -> None:
    """Write a file atomically (a temp file beside it, synced, renamed), mode 0600."""
    prefix = f".{path.name.partition('-')[0]}-"  # the home's key: its forget finds a temp file a crash left
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=prefix, suffix=".tmp")  # mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


def _shred(path: Path) -> None:
    """Overwrite a file with zeros, then remove it."""
    fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW)
    try:
        path.unlink()
        os.pwrite(fd, b"\0" * os.fstat(fd).st_size, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def _make(folder: Path) -> None:
    """Make a held folder (mode 0700); raises OSError when it exists but is not this user's own."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    found = os.lstat(folder)
    if stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and found.st_mode & 0o077:
        os.chmod(folder, 0o700)  # this user's, made with a wider umask
    if not _ours(folder):
        raise OSError(f"{folder} is not a folder of this user only")


def _ours(folder: Path) -> bool:
    """Whether a folder is a real folder (no link) owned by this user and closed to others."""
    try:
        found = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(found.st_mode) and found.st_uid == os.getuid() and not found.st_mode & 0o077
