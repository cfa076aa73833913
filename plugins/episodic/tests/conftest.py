"""Shared fixtures: a clean environment and one PostgreSQL (pgserver) per session."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ANTHROPIC_*, HONCHO_* or THOTH_* variable leaks into a test."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "HONCHO_", "THOTH_")):
            monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[object]:
    """A real PostgreSQL 16 with pgvector from the pgserver wheel, in a temp dir.

    Not under pytest's tmp_path: run as root, pgserver starts postgres as its own user,
    which cannot enter pytest's private (0700) temp root.
    """
    pgserver = pytest.importorskip("pgserver")
    parent = Path(tempfile.mkdtemp(prefix="thoth-episodic-pg-"))
    parent.chmod(0o755)
    server = pgserver.get_server(parent / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        _stop_postmaster(parent / "data")
        shutil.rmtree(parent, ignore_errors=True)


def _stop_postmaster(data: Path) -> None:
    """Stop the server this fixture started if pgserver's cleanup left it running."""
    pid_file = data / "postmaster.pid"
    if not pid_file.exists():
        return
    pid = int(pid_file.read_text().split()[0])
    try:
        os.kill(pid, signal.SIGINT)  # PostgreSQL's fast shutdown
    except ProcessLookupError:
        return
    for _ in range(100):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)


@pytest.fixture
def pg_dsn(pg_server: object) -> str:
    """A fresh, empty schema (first on the search path) on the session's server."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    uri = pg_server.get_uri()  # type: ignore[attr-defined]
    with psycopg.connect(uri, autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        db.execute(f"CREATE SCHEMA {name}")
    return f"{uri}&options=-c%20search_path%3D{name}%2Cpublic"
