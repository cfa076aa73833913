"""Git for agent homes: create the repository, commit exactly one path (plain `git -C` subprocesses)."""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

logger = logging.getLogger(__name__)

FALLBACK_IDENTITY = ("-c", "user.name=Thoth", "-c", "user.email=thoth@localhost")


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=60)


def repository_of(path: Path) -> Path | None:
    """The top folder of the git work tree holding path, if any."""
    try:
        found = _git(path if path.is_dir() else path.parent, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(found.stdout.strip()) if found.returncode == 0 and found.stdout.strip() else None


def git_commit(path: Path, message: str, *, only: list[Path] | None = None) -> str | None:
    """Commit exactly `path` (added, changed or removed files), or just the `only` paths in it; returns the commit id.

    Other changes in the repository are left out (`git commit -- PATH...`). Returns None when
    path is not in a repository, nothing in it changed, or the commit failed (logged with git's message).
    """
    repo = repository_of(path if path.is_dir() else path.parent)
    if repo is None:
        return None
    relative = [os.path.relpath(p.resolve(), repo.resolve()) for p in (only or [path])]
    identity = () if _git(repo, "config", "user.email").stdout.strip() else FALLBACK_IDENTITY
    steps = {
        "add": ("add", "-A", "--", *relative),
        "commit": (*identity, "commit", "-q", "-m", message, "--", *relative),
    }
    for name, args in steps.items():
        if name == "commit" and _git(repo, "diff", "--cached", "--quiet", "--", *relative).returncode == 0:
            return None  # already committed as it is (an apply done again)
        done = _git(repo, *args)
        if done.returncode != 0:
            logger.error("git %s in %s failed: %s", name, repo, (done.stderr or done.stdout).strip())
            return None
    return _git(repo, "rev-parse", "HEAD").stdout.strip() or None


def tracks_files(root: Path) -> bool:
    """True when root is the top of a git repository that already tracks files."""
    if not (root / ".git").exists():
        return False
    try:
        return bool(_git(root, "ls-files").stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return False


def git_init(root: Path, message: str, files: list[str]) -> str | None:
    """Make root a git repository (unless it is one) and commit these files of it; returns the commit id."""
    try:
        if not (root / ".git").exists() and _git(root, "init", "-q").returncode != 0:
            return None
    except (OSError, subprocess.SubprocessError) as exc:
        logger.warning("git is not available (%s): the agent home is not a git repository", exc)
        return None
    return git_commit(root, message, only=[root / name for name in files])
