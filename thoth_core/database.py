"""Where a layer keeps its tables: an SQLite file in the agent home, or one shared PostgreSQL.

`open_database(config, "identity", path=..., migrations=..., postgres=...)` returns a `Database`.
With `[storage] url` (or `$THOTH_STORAGE_URL`) set to a `postgresql://` URL, every store lives
in that server, each in its own schema (`thoth_identity`, ...) reached through a small
connection pool, so several worker processes on several hosts share one state. Otherwise it is
the SQLite file at `path` (WAL, numbered migrations; see `thoth_core.storage`).

Stores write SQL once, with `?` placeholders and the syntax both dialects share (`ON CONFLICT
... DO NOTHING/UPDATE`, `RETURNING`); only their table definitions differ, so each gives
SQLite's migrations and PostgreSQL's. Migrations run under a lock in both dialects, so
workers starting at once apply each step once. `lock(key)` is a mutual exclusion across every
process sharing the store (a PostgreSQL advisory lock, or a file lock beside the SQLite file),
released when its holder exits or dies.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import socket
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .errors import ConfigError
from .storage import connect, migrate, scrub

URL_ENV = "THOTH_STORAGE_URL"
POOL_SIZE = 4  # connections per store and process; a turn's writes rarely overlap more
LOCK_CONNECT_SECONDS = 10  # a lock's own connection: a server that does not answer fails the lock, not hangs it
VERSION_TABLE = "thoth_schema_version"

PgMigration = str | Callable[["Database"], object]


class Result(Protocol):
    """What `execute` returns: an sqlite3 cursor, or a PostgreSQL statement's fetched rows."""

    rowcount: int

    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


def worker_id() -> str:
    """A name for this process in claims other workers read: host, pid and a random part (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def storage_url(config: Any) -> str | None:
    """The shared store's URL (`$THOTH_STORAGE_URL`, else `[storage] url`), or None for SQLite files."""
    url = os.environ.get(URL_ENV) or config.section("storage").get("url") or None
    if url is None:
        return None
    if not isinstance(url, str) or not url.startswith(("postgresql://", "postgres://")):
        where = URL_ENV if os.environ.get(URL_ENV) else f"{config.source}: storage.url"
        raise ConfigError(f"{where}: expected a postgresql:// URL, got {str(url)[:40]!r}")
    return url


_REACHED: set[str] = set()  # each process connects once per URL before its stores open
_UNREACHABLE: dict[str, str] = {}  # url -> why it did not answer


def reachable(config: Any) -> Any:
    """The config, once its shared PostgreSQL (if any) answers; else one ConfigError line, at once, not per store."""
    url = storage_url(config)
    if url is None or url in _REACHED:
        return config
    if url not in _UNREACHABLE:
        try:
            import psycopg

            psycopg.connect(url, connect_timeout=LOCK_CONNECT_SECONDS).close()
            _REACHED.add(url)
            return config
        except ImportError:
            return config  # `open_database` says what to install
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the finding
            _UNREACHABLE[url] = str(exc).strip().splitlines()[0][:200]
    raise ConfigError(f"storage.url: the shared PostgreSQL does not answer: {_UNREACHABLE[url]}")


def open_database(
    config: Any,
    name: str,
    *,
    path: Path,
    migrations: Sequence[Any],
    postgres: Sequence[PgMigration],
    rows: bool = False,
    **sqlite_options: Any,
) -> Database:
    """The store `name`: in the shared PostgreSQL when one is configured, else the SQLite file `path`."""
    url = storage_url(reachable(config))
    if url is None:
        return SqliteDatabase(path, migrations, rows=rows, **sqlite_options)
    return PostgresDatabase(url, name, postgres, rows=rows)


class Database:
    """A store's connection(s), the same API over both dialects; safe to use from worker threads."""

    dialect: str = ""
    where: str = ""  # the file or schema, for messages
    errors: tuple[type[BaseException], ...] = ()  # what a failed read or write raises (disk full, server down)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Result:
        """Run one statement (`?` placeholders) and return its rows."""
        raise NotImplementedError

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters, in one transaction."""
        with self.transaction() as tx:
            for row in rows:
                tx.execute(sql, row)

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """A transaction (taking the write lock at once); statements on what it yields run inside it."""
        raise NotImplementedError
        yield self

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the lock named `key` against every process sharing this store."""
        raise NotImplementedError
        yield

    def scrub(self, tables: Sequence[str] = (), fts: Sequence[str] = ()) -> dict[str, int]:
        """Erase what deletes left behind in the files (after a forget); a receipt addition."""
        return {}

    def close(self) -> None:
        """Close the connections."""


class SqliteDatabase(Database):
    """One SQLite file: a shared connection guarded by a lock (see `thoth_core.storage`)."""

    dialect = "sqlite"
    errors = (sqlite3.Error,)

    def __init__(self, path: Path, migrations: Sequence[Any], *, rows: bool = False, **options: Any) -> None:
        self.path = path
        self.where = str(path)
        self.db = connect(path, rows=rows, **options)
        self.guard = threading.RLock()
        self._in_transaction: threading.local = threading.local()
        migrate(self.db, migrations)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Result:
        with self.guard:
            return self.db.execute(sql, params)

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        with self.guard:
            if getattr(self._in_transaction, "on", False):  # nested: part of the outer one
                yield self
                return
            self.db.execute("BEGIN IMMEDIATE")
            self._in_transaction.on = True
            try:
                yield self
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            else:
                self.db.execute("COMMIT")
            finally:
                self._in_transaction.on = False

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        folder = self.path.parent / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / hashlib.sha256(key.encode()).hexdigest()[:32]).open("a") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)

    def scrub(self, tables: Sequence[str] = (), fts: Sequence[str] = ()) -> dict[str, int]:
        with self.guard:
            return scrub(self.db, fts=fts)

    def close(self) -> None:
        with self.guard:
            self.db.close()


class Row(tuple):
    """A PostgreSQL row read by position or by column name, like `sqlite3.Row`."""

    names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names.index(key))
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        """The column names."""
        return list(self.names)


@dataclass
class Fetched:
    """A PostgreSQL statement's rows, read before its connection went back to the pool."""

    rows: list[Any] = field(default_factory=list)
    rowcount: int = -1

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list[Any]:
        return self.rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.rows)


_QUOTED_OR_MARK = re.compile(r"('(?:[^']|'')*'|\"(?:[^\"]|\"\")*\")|(\?)")


def postgres_sql(sql: str) -> str:
    """`?` placeholders (outside quoted text) as psycopg's `%s`, and every literal `%` as `%%`."""

    def swap(match: re.Match[str]) -> str:
        quoted, mark = match.groups()
        return "%s" if mark else quoted

    return _QUOTED_OR_MARK.sub(swap, sql.replace("%", "%%"))


def _row_factory(rows: bool) -> Any:
    from psycopg.rows import tuple_row

    if not rows:
        return tuple_row

    def factory(cursor: Any) -> Callable[[Sequence[Any]], Row]:
        names = tuple(column.name for column in cursor.description or ())

        def make(values: Sequence[Any]) -> Row:
            row = Row(values)
            row.names = names
            return row

        return make

    return factory


class PostgresDatabase(Database):
    """A store's schema in the shared PostgreSQL, through a small pool of connections."""

    dialect = "postgres"

    def __init__(self, url: str, name: str, migrations: Sequence[PgMigration], *, rows: bool = False) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:
            hint = "pip install 'thoth-core[postgres]'"
            raise ConfigError(
                f"storage.url: the PostgreSQL store needs psycopg and psycopg-pool: {hint} ({exc})"
            ) from exc
        self.errors = (psycopg.Error, PoolTimeout)
        self.url = url
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"store name {name!r}: lower-case letters, digits and '_'")
        self.schema = f"thoth_{name}"
        self.where = f"PostgreSQL schema {self.schema}"
        self._row_factory = _row_factory(rows)
        self._bound = threading.local()
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs={"autocommit": True, "options": f"-c search_path={self.schema},public"},
            configure=self._configure,
            open=False,
            name=self.schema,
        )
        try:
            self.pool.open(wait=True, timeout=30)
            self._migrate(migrations)
        except BaseException:
            self.pool.close()
            raise

    def _configure(self, connection: Any) -> None:
        connection.row_factory = self._row_factory

    def _migrate(self, migrations: Sequence[PgMigration]) -> None:
        """Apply the steps not yet applied, all under one advisory lock, so concurrent starts apply each once."""
        with self.pool.connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.schema,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
            row = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
            done = 0 if row is None else row[0]
            if row is None:
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (0)")
            self._bound.conn = conn
            try:
                for step in migrations[done:]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(self)
            finally:
                self._bound.conn = None
            conn.execute(f"UPDATE {VERSION_TABLE} SET version = %s", (len(migrations),))

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Result:
        bound = getattr(self._bound, "conn", None)
        if bound is not None:
            return self._run(bound, sql, params)
        with self.pool.connection() as conn:
            return self._run(conn, sql, params)

    def _run(self, conn: Any, sql: str, params: Sequence[Any] | dict[str, Any]) -> Fetched:
        cursor = conn.execute(postgres_sql(sql) if params else sql, params or None)
        rows = cursor.fetchall() if cursor.description is not None else []
        return Fetched(rows, cursor.rowcount)

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        if getattr(self._bound, "conn", None) is not None:  # nested: part of the outer one
            yield self
            return
        with self.pool.connection() as conn, conn.transaction():
            self._bound.conn = conn
            try:
                yield self
            finally:
                self._bound.conn = None

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """An advisory lock on a connection of its own (not the pool's): a dead holder's lock goes with it."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=LOCK_CONNECT_SECONDS) as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"{self.schema}:{key}",))
            yield

    def scrub(self, tables: Sequence[str] = (), fts: Sequence[str] = ()) -> dict[str, int]:
        """VACUUM the tables a forget deleted from, so their dead rows' pages are reused."""
        with self.pool.connection() as conn:
            for table in tables:
                conn.execute(f'VACUUM "{table}"')
        return {}

    def close(self) -> None:
        self.pool.close()


def shared(config: Any) -> bool:
    """Whether the layers' state lives in a shared PostgreSQL (`[storage] url` is set)."""
    return storage_url(config) is not None


__all__ = [
    "Database",
    "PostgresDatabase",
    "Result",
    "Row",
    "SqliteDatabase",
    "open_database",
    "reachable",
    "postgres_sql",
    "shared",
    "storage_url",
    "worker_id",
]
