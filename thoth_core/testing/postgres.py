"""A real PostgreSQL 16 with pgvector (the `pgserver` wheel) for tests: `pg_server`, `storage_url`, `storage_config`."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Any]:
    """One server per test session, in a temp dir.

    Not under pytest's tmp_path: run as root, pgserver starts postgres as its own user,
    which cannot enter pytest's private (0700) temp root.
    """
    pgserver = pytest.importorskip("pgserver")
    parent = Path(tempfile.mkdtemp(prefix="thoth-pg-"))
    parent.chmod(0o755)
    server = pgserver.get_server(parent / "data", cleanup_mode="delete")
    _without_durability(server)
    try:
        yield server
    finally:
        server.cleanup()
        _stop_postmaster(parent / "data")
        shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def storage_url(pg_server: Any) -> str:
    """The URL of a fresh, empty database on the session's server (for `[storage] url`)."""
    return fresh_database(pg_server)


@pytest.fixture(params=["sqlite", "postgres"])
def storage_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A runtime's config for each dialect, to run one contract on both: `{}` (SQLite files), or `[storage] url`.

    The PostgreSQL server starts only when a test asks for the second.
    """
    if request.param == "sqlite":
        return {}
    return {"storage": {"url": request.getfixturevalue("storage_url")}}


def stop_server(server: Any) -> None:
    """Stop the server at once (`pg_ctl stop -m fast`): every connection to it breaks, new ones are refused."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]  # not re-exported by its stubs

    pg_ctl(["-w", "-m", "fast", "stop"], pgdata=server.pgdata, user=server.system_user)


def start_server(server: Any) -> None:
    """Start a server `stop_server` stopped, on the same socket (its URLs stay valid)."""
    server.ensure_postgres_running()


@contextmanager
def outage(server: Any) -> Iterator[None]:
    """The server stopped for the block, started again after it (also when the block fails)."""
    stop_server(server)
    try:
        yield
    finally:
        start_server(server)


def fresh_database(server: Any) -> str:
    """Create an empty database (with pgvector) on the server; its URL."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    uri = str(server.get_uri())
    with psycopg.connect(uri, autocommit=True) as db:
        db.execute(f"CREATE DATABASE {name}")
    url = uri.replace("/postgres?", f"/{name}?", 1) if "/postgres?" in uri else uri.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE EXTENSION IF NOT EXISTS vector")
    return url


def _without_durability(server: Any) -> None:
    """No fsync, full-page writes or synchronous commit: a throwaway server need not survive a power cut."""
    import psycopg  # with fsync, CREATE DATABASE and the shutdown checkpoint flushed every test's database

    with psycopg.connect(server.get_uri(), autocommit=True) as db:
        for setting in ("fsync", "full_page_writes", "synchronous_commit"):
            db.execute(f"ALTER SYSTEM SET {setting} = off")
        db.execute("SELECT pg_reload_conf()")


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
