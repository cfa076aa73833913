"""Skill folders as files: read one, and write one that is never seen half-written (built aside, renamed in)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from .validate import SkillError

Files = dict[str, str]  # a skill folder: relative path -> text


def digest(files: Files) -> str:
    """One hash of a skill's files (paths and texts)."""
    hashed = hashlib.sha256()
    for path in sorted(files):
        hashed.update(path.encode() + b"\0" + files[path].encode() + b"\0")
    return hashed.hexdigest()


def folder_files(folder: Path, *, without: tuple[str, ...] = ()) -> Files | None:
    """A skill folder's files (None when it is missing, a symlink, or holds something not text)."""
    if not folder.is_dir() or folder.is_symlink():
        return None
    try:
        return {
            path.relative_to(folder).as_posix(): path.read_text(encoding="utf-8")
            for path in sorted(folder.rglob("*"))
            if path.is_file() and path.relative_to(folder).as_posix() not in without
        }
    except (OSError, UnicodeDecodeError):
        return None


def write_files(folder: Path, files: Files) -> None:
    """Write a skill's files into a new folder (no file may land outside it)."""
    folder.mkdir(parents=True, exist_ok=True)
    root = folder.resolve()
    for relative, text in files.items():
        target = folder / relative
        if not target.resolve().is_relative_to(root) or target.resolve() == root:
            raise SkillError(f"{folder}: the file {relative!r} would land outside the skill folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


@contextmanager
def staging(parent: Path) -> Iterator[Path]:
    """A hidden scratch folder beside the target (same filesystem, so renames are atomic), removed after."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".staging-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def swap_in(staged: Path, target: Path) -> None:
    """Rename staged onto target; an existing target is moved into the staging folder first."""
    aside = staged.parent / ".previous"
    had_target = target.exists()
    if had_target:
        os.rename(target, aside)
    try:
        os.rename(staged, target)
    except OSError:
        if had_target:
            os.rename(aside, target)
        raise


__all__ = ["Files", "digest", "folder_files", "staging", "swap_in", "write_files"]
