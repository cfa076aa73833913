"""The store API over both dialects: SQLite files and the shared PostgreSQL (`[storage] url`)."""

from __future__ import annotations

import multiprocessing
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from thoth_core.config import Config, validate
from thoth_core.database import PostgresDatabase, SqliteDatabase, open_database, postgres_sql, storage_url
from thoth_core.errors import ConfigError

SQLITE = ["CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL UNIQUE, at REAL NOT NULL)"]
POSTGRES = ["CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL UNIQUE, at DOUBLE PRECISION NOT NULL)"]


def config_with(url: str | None) -> Config:
    return Config(data={"storage": {"url": url}} if url else {})


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    url = request.getfixturevalue("storage_url") if request.param == "postgres" else None
    db = open_database(
        config_with(url), "notes", path=tmp_path / "notes.db", migrations=SQLITE, postgres=POSTGRES, rows=True
    )
    yield db
    db.close()


def test_the_url_chooses_the_dialect(tmp_path: Path, storage_url: str) -> None:
    sqlite = open_database(config_with(None), "notes", path=tmp_path / "n.db", migrations=SQLITE, postgres=POSTGRES)
    shared = open_database(
        config_with(storage_url), "notes", path=tmp_path / "m.db", migrations=SQLITE, postgres=POSTGRES
    )
    assert isinstance(sqlite, SqliteDatabase) and (tmp_path / "n.db").exists()
    assert isinstance(shared, PostgresDatabase) and not (tmp_path / "m.db").exists()
    assert shared.execute("SELECT current_schema()").fetchone()[0] == "thoth_notes"
    sqlite.close()
    shared.close()


def test_statements_read_and_write_alike(database: Any) -> None:
    inserted = database.execute("INSERT INTO notes (body, at) VALUES (?, ?) RETURNING id", ("50% off", 1.5)).fetchone()
    again = database.execute(
        "INSERT INTO notes (body, at) VALUES (?, ?) ON CONFLICT (body) DO NOTHING", ("50% off", 2.0)
    )
    assert again.rowcount == 0
    row = database.execute("SELECT id, body, at FROM notes WHERE body LIKE '50%' AND body <> ?", ("?",)).fetchone()
    assert database.execute("SELECT count(*) FROM notes WHERE body LIKE '%off'").fetchone()[0] == 1
    assert (row[0], row["body"], row["at"]) == (inserted[0], "50% off", 1.5)
    assert database.execute("UPDATE notes SET at = ? WHERE id = ?", (time.time(), row[0])).rowcount == 1


def test_a_failed_transaction_leaves_nothing(database: Any) -> None:
    with pytest.raises(RuntimeError), database.transaction() as tx:
        tx.execute("INSERT INTO notes (body, at) VALUES (?, ?)", ("kept?", 1.0))
        raise RuntimeError("boom")
    with database.transaction() as tx, tx.transaction() as inner:
        inner.execute("INSERT INTO notes (body, at) VALUES (?, ?)", ("kept", 1.0))
    assert [r[0] for r in database.execute("SELECT body FROM notes")] == ["kept"]


def test_the_lock_excludes_other_threads(database: Any) -> None:
    order: list[str] = []

    def hold(name: str) -> None:
        with database.lock("thread-1"):
            order.append(f"{name} in")
            time.sleep(0.1)
            order.append(f"{name} out")

    workers = [threading.Thread(target=hold, args=(n,)) for n in "ab"]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


def _open_and_insert(url: str, folder: str, body: str) -> None:
    config = config_with(url or None)
    db = open_database(config, "notes", path=Path(folder) / "notes.db", migrations=SQLITE, postgres=POSTGRES)
    db.execute("INSERT INTO notes (body, at) VALUES (?, ?)", (body, 1.0))
    db.close()


@pytest.mark.parametrize("dialect", ["sqlite", "postgres"])
def test_workers_starting_at_once_migrate_once(dialect: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("storage_url") if dialect == "postgres" else ""
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_open_and_insert, args=(url, str(tmp_path), f"w{i}")) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [w.exitcode for w in workers] == [0] * 4
    db = open_database(
        config_with(url or None), "notes", path=tmp_path / "notes.db", migrations=SQLITE, postgres=POSTGRES
    )
    assert sorted(r[0] for r in db.execute("SELECT body FROM notes")) == ["w0", "w1", "w2", "w3"]
    db.close()


def test_placeholders_become_psycopgs_outside_quotes() -> None:
    assert postgres_sql("SELECT '?', \"a?\" FROM t WHERE x = ? AND y LIKE 'a%'") == (
        "SELECT '?', \"a?\" FROM t WHERE x = %s AND y LIKE 'a%%'"
    )
    assert postgres_sql("SELECT x % 2 FROM t WHERE y = ?") == "SELECT x %% 2 FROM t WHERE y = %s"


def test_a_bad_url_or_a_literal_password_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="storage.url: expected a postgresql:// URL"):
        storage_url(config_with("mysql://x"))
    with pytest.raises(ConfigError, match="storage.url: a password is a secret"):
        validate(Config(data={"storage": {"url": "postgresql://u:hunter2@db/thoth"}}))
    with pytest.raises(ConfigError, match="unknown key in \\[storage\\]"):
        validate(Config(data={"storage": {"uri": "postgresql://db/thoth"}}))
    monkeypatch.setenv("THOTH_STORAGE_URL", "postgresql://db/other")
    assert storage_url(config_with("postgresql://db/thoth")) == "postgresql://db/other"


def test_doctor_says_where_the_state_lives_and_whether_the_server_answers(make_runtime: Any, storage_url: str) -> None:
    from thoth_core.doctor import shared_store

    assert shared_store(make_runtime())[1].startswith("storage: SQLite files in")
    assert shared_store(make_runtime(config={"storage": {"url": storage_url}})) == (
        True,
        "storage: shared PostgreSQL 16.2 answers",
    )
    ok, line = shared_store(make_runtime(config={"storage": {"url": "postgresql://nobody@127.0.0.1:9/none"}}))
    assert not ok and line.startswith("storage: the shared PostgreSQL does not answer:")


def test_a_url_the_server_refuses_is_one_line_at_once(tmp_path: Path, storage_url: str) -> None:
    """An unknown database is configuration, not an outage: one line, no turn (a server that does not answer is
    an outage: `tests/test_store_down_at_start.py`)."""
    from thoth_core.testing import run_thoth

    started = time.monotonic()
    url = storage_url.replace("/t_", "/nothere_", 1)  # `fresh_database` names them t_<hex>
    missing = url.split("/nothere_", 1)[1].split("?")[0]
    env = {"THOTH_STORAGE_URL": url, "THOTH_LOAD_PLUGINS": "working,identity"}
    result = run_thoth("ask", "--peer", "ann", "hello", cwd=tmp_path, env=env)
    assert result.returncode == 2 and time.monotonic() - started < 20
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("thoth: error: storage.url: the shared PostgreSQL refuses the connection: "), line
    assert line.endswith(f'FATAL:  database "nothere_{missing}" does not exist'), line
