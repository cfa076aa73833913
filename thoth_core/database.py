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

When the server goes away, no caller waits for it: every store on one URL shares a `Circuit`.
A connection that breaks, or a pool that gives none within `POOL_WAIT_SECONDS`, makes the circuit
try one fresh connection (`CONNECT_SECONDS` at most); if that fails too, the server is *down*:
every statement raises `StoreDown` at once, and a daemon thread tries to connect every
`PROBE_SECONDS`. Once one works the circuit is *up* again and calls its listeners: each store
swaps its pool for a new one (the old one's connections died with the server, and its reconnect
back-off could otherwise hold the next statements up), `HeldLock`s take their locks again, and
whoever asked (`when_back`) replays what waited.

A process may also *start* while the server is away. `reachable` tries one connection per URL
and process: a refusal that is configuration (an unknown database or role, a failed password)
is one ConfigError line; anything else (refused, timed out, shutting down) trips the circuit with
one warning, and the process goes on. Stores then open without connecting (`CircuitPool`): their
statements raise `StoreDown` as in any outage, and each applies its migrations before its first
statement once the server answers.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .errors import ConfigError
from .storage import connect, migrate, scrub

URL_ENV = "THOTH_STORAGE_URL"
POOL_SIZE = 4  # connections per store and process; a turn's writes rarely overlap more
CONNECT_SECONDS = 2  # one connection attempt (pool, probe, held lock): libpq's smallest useful timeout
POOL_WAIT_SECONDS = 1.0  # a statement waits this long for a pooled connection before the server is probed
POOL_TIMEOUT = 30.0  # ... and, the server answering (the pool is only busy), this long in all
OPEN_SECONDS = 5.0  # a new store waits this long for its first connection
PROBE_SECONDS = 0.5  # how often a server found down is tried again
KEEP_SECONDS = 1.0  # how often a held lock's connection is checked (and the lock re-taken after a restart)
RESTART_GRACE_SECONDS = 10.0  # after the server (re)starts, how long a lock's holder has to take it again
VERSION_TABLE = "thoth_schema_version"

PgMigration = str | Callable[["Database"], object]
T = TypeVar("T")

logger = logging.getLogger(__name__)


class Result(Protocol):
    """What `execute` returns: an sqlite3 cursor, or a PostgreSQL statement's fetched rows."""

    @property
    def rowcount(self) -> int: ...

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
_REFUSED: dict[str, str] = {}  # url -> why the server refused it (its configuration)


class StoreDown(Exception):
    """The shared PostgreSQL does not answer; raised at once, without waiting, until a probe finds it up."""


class Circuit:
    """Whether one PostgreSQL server answers, shared by every store of this process on its URL (see the module doc)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down: str | None = None  # why, while the server is found down
        self.since = self._last_back = 0.0
        self._up = threading.Event()
        self._up.set()
        self._lock = threading.Lock()
        self._listeners: list[Callable[[], object]] = []
        self._resets: list[Callable[[], object]] = []  # run before the circuit closes (stores swap their pools)

    def check(self) -> None:
        """Raise StoreDown if the server is found down (no waiting)."""
        if self.down is not None:
            raise StoreDown(f"the shared PostgreSQL does not answer ({self.down})")

    def answers(self) -> bool:
        """Whether a fresh connection can be made now (within CONNECT_SECONDS)."""
        import psycopg

        try:
            psycopg.connect(self.url, connect_timeout=CONNECT_SECONDS, autocommit=True).close()
        except psycopg.Error:
            return False
        return True

    def connect(self, **options: Any) -> Any:
        """A connection of its own (a lock's, an index build's): StoreDown at once while down; a failure trips it."""
        import psycopg

        self.check()
        try:
            return psycopg.connect(self.url, **{"connect_timeout": CONNECT_SECONDS, **options})
        except psycopg.OperationalError as exc:
            self.failed(exc)
            raise

    def failed(self, exc: BaseException, *, broken: bool = False) -> None:
        """A connection broke (`broken`) or none came: find the server down unless a fresh connection works.

        A broken connection on a server that answers means it restarted (or the link was cut): the
        listeners run as after an outage (new pools, locks re-taken), at most once per `PROBE_SECONDS` * 4.
        """
        if self.down is not None:
            return
        reason = first_line(exc)
        if not self.answers():
            self.trip(reason)
            return
        if broken:
            with self._lock:
                if self.down is not None or time.monotonic() - self._last_back < PROBE_SECONDS * 4:
                    return
                self._last_back = time.monotonic()
            logger.warning("storage: a connection to the shared PostgreSQL broke (%s); it answers: renewing", reason)
            threading.Thread(target=self._back, name="thoth-store-back", daemon=True).start()

    def trip(self, reason: str, *, starting: bool = False) -> None:
        """Find the server down: statements fail at once and a probe waits for it to answer again.

        `starting`: found down before this process's first connection (the warning says so).
        """
        with self._lock:
            if self.down is not None:
                return
            self.down, self.since = reason, time.monotonic()
            self._up.clear()
        if starting:
            logger.warning(
                "storage: the shared PostgreSQL does not answer (%s); turns are kept locally until it answers",
                reason,
            )
        else:
            logger.warning(
                "storage: the shared PostgreSQL does not answer (%s); trying again every %.1f s", reason, PROBE_SECONDS
            )
        threading.Thread(target=self._probe, name="thoth-store-probe", daemon=True).start()

    def _probe(self) -> None:
        while not self.answers():
            time.sleep(PROBE_SECONDS)
        logger.warning("storage: the shared PostgreSQL answers again after %.1f s", time.monotonic() - self.since)
        self._back()

    def _back(self) -> None:
        """The server answers: reset the stores, let statements through, then call the listeners."""
        with self._lock:
            self._last_back = time.monotonic()
            resets = list(self._resets)
        _call_each(resets)
        with self._lock:
            self.down = None
            listeners = list(self._listeners)
        _call_each(listeners)
        self._up.set()

    def wait_up(self, timeout: float) -> bool:
        """Wait up to `timeout` s for the server to be up (at once if it is not found down); whether it is."""
        return self._up.wait(timeout)

    def on_up(self, listener: Callable[[], object], *, first: bool = False) -> Callable[[], None]:
        """Call `listener` (in the probe's thread) each time the server answers again; returns the unsubscribe.

        `first` listeners run before statements are let through again (a store swapping its pool).
        """
        listeners = self._resets if first else self._listeners
        with self._lock:
            listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in listeners:
                    listeners.remove(listener)

        return unsubscribe


def _call_each(listeners: list[Callable[[], object]]) -> None:
    for listener in listeners:
        try:
            listener()
        except Exception:  # noqa: BLE001 - one listener's failure must not keep the others from running
            logger.exception("storage: a listener failed after the server came back")


_CIRCUITS: dict[str, Circuit] = {}
_CIRCUITS_LOCK = threading.Lock()


def circuit(url: str) -> Circuit:
    """The circuit of the server at `url`, one per process."""
    with _CIRCUITS_LOCK:
        if url not in _CIRCUITS:
            _CIRCUITS[url] = Circuit(url)
        return _CIRCUITS[url]


def when_back(config: Any, listener: Callable[[], object]) -> Callable[[], None] | None:
    """Call `listener` each time the shared PostgreSQL answers again after an outage; None without one."""
    url = storage_url(config)
    return None if url is None else circuit(url).on_up(listener)


_REFUSED_BY_CONFIGURATION = re.compile(
    "|".join(
        (
            r'FATAL:\s+(database|role) ".*" does not exist',
            r"FATAL:\s+.*authentication failed",
            r"FATAL:\s+no pg_hba\.conf entry",
            r"FATAL:\s+permission denied for database",
            r"no password supplied",
            r"invalid .*value",  # a bad port, sslmode, ...
            r"invalid (URI|connection option)",
        )
    ),
    re.IGNORECASE,
)


def refused_by_configuration(exc: BaseException) -> bool:
    """Whether a failed connection is the URL's fault (database, role, password, options), not an absent server."""
    import psycopg

    if isinstance(exc, psycopg.Error) and not isinstance(exc, psycopg.OperationalError):
        return True  # e.g. ProgrammingError: an unknown URI parameter
    return _REFUSED_BY_CONFIGURATION.search(str(exc)) is not None


def first_line(exc: BaseException) -> str:
    """An exception's first line (at most 200 characters), or its type's name."""
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


def reachable(config: Any) -> Any:
    """The config, its shared PostgreSQL (if any) tried once per process (`first_contact`)."""
    url = storage_url(config)
    if url is not None:
        first_contact(url)
    return config


def first_contact(url: str) -> None:
    """Try the server at `url` once per process, before its first store opens (see the module doc).

    A refusal that is configuration is one ConfigError line, at once, not per store; a server that does
    not answer trips its circuit with one warning (its stores then open without waiting for it).
    """
    if url in _REACHED or circuit(url).down is not None:
        return
    if url not in _REFUSED:
        try:
            import psycopg

            psycopg.connect(url, connect_timeout=CONNECT_SECONDS).close()
            _REACHED.add(url)
            return
        except ImportError:
            return  # `open_database` says what to install
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the finding
            if not refused_by_configuration(exc):
                circuit(url).trip(first_line(exc), starting=True)
                return
            _REFUSED[url] = first_line(exc)
    raise ConfigError(f"storage.url: the shared PostgreSQL refuses the connection: {_REFUSED[url]}")


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

    def fetch(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        """Run one statement (`?` placeholders) and return all its rows, read before another thread's statement."""
        return list(self.execute(sql, params).fetchall())

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

    @property
    def in_transaction(self) -> bool:
        """Whether this thread's statements run inside its open `transaction()`."""
        return False

    @contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold the lock named `key` against every process sharing this store."""
        raise NotImplementedError
        yield

    def scrub(self, tables: Sequence[str] = (), fts: Sequence[str] = ()) -> dict[str, int]:
        """Erase what deletes left behind in the files (after a forget); a receipt addition."""
        return {}

    def wait_up(self, timeout: float) -> bool:
        """Wait up to `timeout` s for a server found down to answer again; True at once if it is not found down."""
        return True

    def patiently(self, action: Callable[[], T], seconds: float) -> T:
        """Run `action` (statements on this store), trying again for up to `seconds` while the store fails."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                return action()
            except self.errors:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise
                self.wait_up(min(left, PROBE_SECONDS))
                time.sleep(min(max(left, 0.0), 0.1))

    def close(self) -> None:
        """Close the connections."""


class SqliteDatabase(Database):
    """One SQLite file: a shared connection guarded by a lock (see `thoth_core.storage`)."""

    dialect = "sqlite"
    errors = (sqlite3.Error,)

    def __init__(
        self,
        path: Path,
        migrations: Sequence[Any],
        *,
        rows: bool = False,
        while_migrating: Callable[[], AbstractContextManager[object]] | None = None,
        **options: Any,
    ) -> None:
        """`while_migrating`: a lock held while steps are due (e.g. against a writer of files beside the store)."""
        self.path = path
        self.where = str(path)
        self.db = connect(path, rows=rows, **options)
        self.guard = threading.RLock()
        self._in_transaction: threading.local = threading.local()
        due = self.db.execute("PRAGMA user_version").fetchone()[0] < len(migrations)
        with self.guard, while_migrating() if due and while_migrating is not None else nullcontext():
            migrate(self.db, migrations)

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Result:
        with self.guard:
            return self.db.execute(sql, params)

    def fetch(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[Any]:
        with self.guard:
            return self.db.execute(sql, params).fetchall()

    @property
    def in_transaction(self) -> bool:
        return bool(getattr(self._in_transaction, "on", False))

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


class Row(tuple[Any, ...]):
    """A PostgreSQL row read by position or by column name, like `sqlite3.Row`."""

    names: tuple[str, ...] = ()

    def __getitem__(self, key: Any) -> Any:
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


class CircuitPool:
    """A psycopg pool on one server's circuit: StoreDown at once while it is down, a new pool each time it is back.

    It opens without waiting when the circuit is already down (a process started in an outage);
    `ready(connection)`, if given, runs once on the first connection it hands out (a store's
    migrations), at opening when the server answers, else before the first statement after it
    does. A connection that breaks, or none within `POOL_WAIT_SECONDS`, asks the circuit.
    """

    def __init__(
        self,
        url: str,
        *,
        name: str,
        kwargs: dict[str, Any],
        configure: Callable[[Any], None] | None = None,
        ready: Callable[[Any], object] | None = None,
    ) -> None:
        from psycopg_pool import PoolTimeout

        self.url, self.name = url, name
        self.circuit = circuit(url)
        self._kwargs = {"connect_timeout": CONNECT_SECONDS, **kwargs}
        self._configure = configure
        self._ready = ready
        self._readied = ready is None
        self._readying = threading.Lock()
        first_contact(url)  # a server that does not answer: found down now, not after a pool's wait
        self._opening = threading.Lock()
        self._closed = False
        self.pool = self._new_pool()
        self._unsubscribe = self.circuit.on_up(self._renew, first=True)
        if self.circuit.down is not None:
            return  # opened when the server answers (`_renew`)
        try:
            try:
                self.pool.open(wait=True, timeout=OPEN_SECONDS)
            except PoolTimeout as exc:
                self.circuit.failed(exc)
                self.circuit.check()
                raise
            with self.connection():
                pass  # `ready` runs now, so a broken migration fails the start, not a turn
        except StoreDown:
            return  # the server went away meanwhile: ready before the first statement after it is back
        except BaseException:
            self.close()
            raise

    def _new_pool(self) -> Any:
        from psycopg_pool import ConnectionPool

        return ConnectionPool(
            self.url,
            min_size=1,
            max_size=POOL_SIZE,
            kwargs=self._kwargs,
            configure=self._configure,
            check=ConnectionPool.check_connection,  # a connection that died with a restart is replaced, not handed out
            open=False,
            name=self.name,
        )

    def _renew(self) -> None:
        """The server answers again: a new pool (the old one's connections died with it, its back-off is long)."""
        with self._opening:
            if self._closed:
                return
            old, self.pool = self.pool, self._new_pool()
            self.pool.open(wait=False)
        old.close(timeout=0)

    def _open_pool(self) -> Any:
        """The pool, opened now if it never was (this pool began in an outage that ended before it subscribed)."""
        pool = self.pool
        if pool.closed and not self._closed:
            with self._opening:
                if self.pool is pool and pool.closed and not self._closed:
                    pool.open(wait=False)
            pool = self.pool
        return pool

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled connection (readied first, once); StoreDown at once while the server is down."""
        from psycopg_pool import PoolTimeout

        self.circuit.check()
        pool = self._open_pool()
        try:
            conn = pool.getconn(timeout=POOL_WAIT_SECONDS)
        except PoolTimeout as exc:  # down, or only busy: one fresh connection tells
            self.circuit.failed(exc)
            self.circuit.check()
            conn = pool.getconn(timeout=POOL_TIMEOUT - POOL_WAIT_SECONDS)
        try:
            if not self._readied:
                with self._readying:
                    if not self._readied:
                        self._ready(conn)  # type: ignore[misc]
                        self._readied = True
            with conn:
                yield conn
        except Exception as exc:
            if conn.broken or conn.closed:
                self.circuit.failed(exc, broken=True)
            raise
        finally:
            pool.putconn(conn)

    @property
    def readied(self) -> bool:
        """Whether `ready` has run (the store's tables are there)."""
        return self._readied

    def get_stats(self) -> dict[str, int]:
        """The current pool's statistics (psycopg_pool's)."""
        return dict(self.pool.get_stats())

    def close(self) -> None:
        """Close the pool and stop renewing it."""
        self._unsubscribe()
        with self._opening:
            self._closed = True
        self.pool.close()


class PostgresDatabase(Database):
    """A store's schema in the shared PostgreSQL, through a `CircuitPool` (opened without waiting in an outage)."""

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        name: str,
        migrations: Sequence[PgMigration],
        *,
        rows: bool = False,
        in_schema: bool = True,
        ready: Callable[[Any], object] | None = None,
    ) -> None:
        """`in_schema` False: the tables are on the URL's own search path (a database of the store's own), not in
        schema `thoth_<name>`. `ready(connection)`, instead of numbered `migrations`: brings the tables up to date
        itself (idempotently, under its own lock) on the first connection, at opening or once the server answers."""
        try:
            import psycopg
            from psycopg_pool import PoolTimeout
        except ImportError as exc:
            hint = "pip install 'thoth-core[postgres]'"
            raise ConfigError(
                f"storage.url: the PostgreSQL store needs psycopg and psycopg-pool: {hint} ({exc})"
            ) from exc
        self.errors = (psycopg.Error, PoolTimeout, StoreDown)
        self.url = url
        if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
            raise ValueError(f"store name {name!r}: lower-case letters, digits and '_'")
        self.schema = f"thoth_{name}"
        self.where = f"PostgreSQL schema {self.schema}" if in_schema else f"PostgreSQL store {name}"
        self.circuit = circuit(url)
        self._migrations = migrations
        self._row_factory = _row_factory(rows)
        self._bound = threading.local()
        self._options: dict[str, Any] = {"autocommit": True}
        if in_schema:
            self._options["options"] = f"-c search_path={self.schema},public"
        self.pool = CircuitPool(
            url,
            name=self.schema,
            kwargs=self._options,
            configure=self._configure,
            ready=self._migrate if ready is None else ready,
        )

    def _configure(self, connection: Any) -> None:
        connection.row_factory = self._row_factory

    def _migrate(self, conn: Any) -> None:
        """Apply the steps not yet applied, all under one advisory lock, so concurrent starts apply each once."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (self.schema,))
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {self.schema}")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (version INTEGER NOT NULL)")
            row = conn.execute(f"SELECT version FROM {VERSION_TABLE}").fetchone()
            done = 0 if row is None else row[0]
            if row is None:
                conn.execute(f"INSERT INTO {VERSION_TABLE} VALUES (0)")
            self._bound.conn = conn
            try:
                for step in self._migrations[done:]:
                    if isinstance(step, str):
                        conn.execute(step)
                    else:
                        step(self)
            finally:
                self._bound.conn = None
            conn.execute(f"UPDATE {VERSION_TABLE} SET version = %s", (len(self._migrations),))

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> Result:
        with self.connection() as conn:
            return self._run(conn, sql, params)

    @contextmanager
    def connection(self) -> Iterator[Any]:
        """This thread's transaction's psycopg connection, or a pooled one (for statements in psycopg's own syntax)."""
        bound = getattr(self._bound, "conn", None)
        if bound is not None:
            yield bound
            return
        with self.pool.connection() as conn:
            yield conn

    def connect(self) -> Any:
        """A connection of its own (not the pool's), autocommit, on the store's tables: StoreDown at once while down."""
        return self.circuit.connect(**self._options)

    @property
    def in_transaction(self) -> bool:
        return getattr(self._bound, "conn", None) is not None

    def _run(self, conn: Any, sql: str, params: Sequence[Any] | dict[str, Any]) -> Fetched:
        cursor = conn.execute(postgres_sql(sql) if params else sql, params or None)
        rows = cursor.fetchall() if cursor.description is not None else []
        return Fetched(rows, cursor.rowcount)

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        if self.in_transaction:  # nested: part of the outer one
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
        with self.circuit.connect(autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"{self.schema}:{key}",))
            yield

    def wait_up(self, timeout: float) -> bool:
        return self.circuit.wait_up(timeout)

    def uptime(self) -> float:
        """Seconds since the server (re)started."""
        row = self.execute("SELECT CAST(EXTRACT(EPOCH FROM now() - pg_postmaster_start_time()) AS DOUBLE PRECISION)")
        return float(row.fetchone()[0])

    def scrub(self, tables: Sequence[str] = (), fts: Sequence[str] = ()) -> dict[str, int]:
        """VACUUM the tables a forget deleted from, so their dead rows' pages are reused."""
        with self.pool.connection() as conn:
            for table in tables:
                conn.execute(f'VACUUM "{table}"')
        return {}

    def close(self) -> None:
        self.pool.close()


class HeldLock:
    """A PostgreSQL advisory lock held for a process's life on a connection of its own, re-taken after a restart.

    The lock goes with its connection: a holder that dies frees it at once. A server restart (or a
    cut connection) frees it too while the holder lives, so a thread checks the connection every
    `KEEP_SECONDS` (and at once when the circuit finds the server up) and, if it died, connects
    again and takes the lock again. Others give a holder `RESTART_GRACE_SECONDS` after the server
    starts before they read a free lock as a dead holder (`PostgresDatabase.uptime`).
    """

    def __init__(self, url: str, key: str) -> None:
        self.url, self.key = url, key
        self._conn: Any = None
        self._guard = threading.Lock()
        self._stopped = threading.Event()
        circuit(url).check()  # a server found down: StoreDown at once, not a connection attempt per lock
        self._take(wait=True)
        self._unsubscribe = circuit(url).on_up(self.keep)
        self._keeper = threading.Thread(target=self._keep_forever, name="thoth-held-lock", daemon=True)
        self._keeper.start()

    @property
    def held(self) -> bool:
        """Whether this process holds the lock now (as far as its last check knows)."""
        return self._conn is not None

    def _take(self, *, wait: bool) -> bool:
        import psycopg

        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=CONNECT_SECONDS)
        try:
            function = "pg_advisory_lock" if wait else "pg_try_advisory_lock"
            row = conn.execute(f"SELECT {function}(hashtextextended(%s, 0))", (self.key,)).fetchone()
        except BaseException:
            conn.close()
            raise
        if not wait and not (row and row[0]):  # still held by our old session (not yet ended on the server)
            conn.close()
            return False
        self._conn = conn
        return True

    def keep(self) -> None:
        """Check the lock's connection; if it died, connect again and re-take the lock (one try)."""
        import psycopg

        with self._guard:
            if self._stopped.is_set():
                return
            if self._conn is not None:
                try:
                    self._conn.execute("SELECT 1")
                    return
                except psycopg.Error as exc:
                    logger.warning("storage: lost the lock %s (%s); taking it again", self.key, exc)
                    self._conn.close()
                    self._conn = None
            try:
                if self._take(wait=False):
                    logger.warning("storage: took the lock %s again", self.key)
            except psycopg.Error:
                pass  # the server is still away: the next check tries again

    def _keep_forever(self) -> None:
        while not self._stopped.wait(KEEP_SECONDS):
            self.keep()

    def release(self) -> None:
        """Give the lock up at once (not when the server notices the connection closed) and stop keeping it."""
        import psycopg

        self._stopped.set()
        self._unsubscribe()
        with self._guard:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (self.key,))
        except psycopg.Error as exc:
            logger.info("storage: releasing the lock %s found its connection gone: %s", self.key, exc)
        finally:
            conn.close()


def shared(config: Any) -> bool:
    """Whether the layers' state lives in a shared PostgreSQL (`[storage] url` is set)."""
    return storage_url(config) is not None


__all__ = [
    "Circuit",
    "CircuitPool",
    "Database",
    "HeldLock",
    "PostgresDatabase",
    "Result",
    "Row",
    "SqliteDatabase",
    "StoreDown",
    "circuit",
    "first_contact",
    "open_database",
    "reachable",
    "postgres_sql",
    "refused_by_configuration",
    "shared",
    "storage_url",
    "when_back",
    "worker_id",
]
