"""Both built-in backends through the shared contract suite."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from thoth_episodic.contract import StoreContract
from thoth_episodic.postgres_store import PostgresStore
from thoth_episodic.sqlite_store import SQLiteStore


class TestSQLiteStore(StoreContract):
    @pytest.fixture
    def open_store(self, tmp_path: Path) -> Callable[[], SQLiteStore]:
        return lambda: SQLiteStore(tmp_path / "episodes.db")


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def open_store(self, pg_dsn: str) -> Callable[[], PostgresStore]:
        return lambda: PostgresStore(pg_dsn)
