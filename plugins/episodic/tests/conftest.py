"""Shared fixtures: a clean environment and a fresh schema on the session's PostgreSQL (`pg_server`)."""

from __future__ import annotations

import os
import uuid

import pytest


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """No ANTHROPIC_*, HONCHO_* or THOTH_* variable leaks into a test."""
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "HONCHO_", "THOTH_")):
            monkeypatch.delenv(name, raising=False)


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
