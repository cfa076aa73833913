"""Migration 5 of the SQLite store: a rowid is never given twice, and every index file's covered mark is honest.

The ANN index files (`ann_files`) say which rows they hold by the newest rowid they covered. With a plain
`INTEGER PRIMARY KEY`, SQLite gives a new row the largest rowid plus one, so once a forget deleted the
newest rows, the next row took a rowid a file already claimed to cover: no writer added it to that file
and no process held it as pending, and dense recall missed it until a rebuild (issue 35). This migration
rebuilds `episodes` with `AUTOINCREMENT`, keeping every rowid (the FTS5 table is keyed by them, and so
are the files), with its indexes and triggers, and sets `sqlite_sequence` to at least the highest rowid
any file beside the store covered, so no new row takes a rowid a file (or a deleted one) vouched for.
A file already missing a current row below its mark (a rowid reused before this migration) has its
mark, and the manifest's, lowered below that row: the row is pending again, and the next writer adds it.
"""

from __future__ import annotations

import fcntl
import logging
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from thoth_core.types import DEFAULT_AGENT

from .ann_files import (
    legacy_paths,
    lock_path,
    manifest_path,
    read_json,
    read_manifest,
    scope_paths,
    sidecar_paths,
    sidecars,
    write_json,
)
from .ann_writer import CURRENT, FILLER_KEYS, IN_SCOPE

log = logging.getLogger(__name__)

TABLE = """
CREATE TABLE episodes_rebuilt (
    rowid INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL,
    workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
    session_id TEXT NOT NULL DEFAULT '', turn_id TEXT NOT NULL DEFAULT '',
    user TEXT NOT NULL, assistant TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '',
    context TEXT NOT NULL DEFAULT '',
    occurred_at REAL NOT NULL, recorded_at REAL NOT NULL, superseded_at REAL,
    cost_usd REAL, model TEXT NOT NULL DEFAULT '', consolidated INTEGER NOT NULL DEFAULT 0,
    embedding BLOB, vector_version INTEGER NOT NULL DEFAULT 0,
    agent TEXT NOT NULL DEFAULT '{agent}'
)
"""
LOCK_WAIT_SECONDS = 10.0  # how long opening a store waits for a running index writer before migrating anyway


def database_path(db: sqlite3.Connection) -> Path | None:
    """The file of the connection's main database (None in memory)."""
    for _, name, file in db.execute("PRAGMA database_list"):
        if name == "main":
            return Path(file) if file else None
    return None


def highest_covered(db_path: Path) -> int:
    """The highest rowid the manifest or any sidecar beside the store names (vouching for its file or not)."""
    found = [read_json(manifest_path(db_path)), read_json(legacy_paths(db_path)[1])]
    found += [read_json(path) for path in sidecar_paths(db_path)]
    marks = [0]
    for meta in found:
        try:
            marks.append(int(meta["rowid"]) if meta is not None else 0)
        except (KeyError, TypeError, ValueError):
            continue
    return max(marks)


def never_reuse_rowids(db: sqlite3.Connection) -> None:
    """Migration 5 (see the module docstring); `sqlite_store` holds the index writers' lock while it runs."""
    (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'episodes'").fetchone()
    if "AUTOINCREMENT" not in sql.upper():
        columns = ", ".join(row[1] for row in db.execute("PRAGMA table_info(episodes)"))
        extras = [
            row[0]
            for row in db.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = 'episodes' AND type IN ('index', 'trigger') "
                "AND sql IS NOT NULL"
            )
        ]
        db.execute(TABLE.format(agent=DEFAULT_AGENT))
        db.execute(f"INSERT INTO episodes_rebuilt ({columns}) SELECT {columns} FROM episodes ORDER BY rowid")
        db.execute("DROP TABLE episodes")
        db.execute("ALTER TABLE episodes_rebuilt RENAME TO episodes")
        for extra in extras:
            db.execute(extra)
    path = database_path(db)
    newest = int(db.execute("SELECT coalesce(max(rowid), 0) FROM episodes").fetchone()[0])
    mark = max(newest, highest_covered(path) if path is not None else 0)
    if not db.execute("UPDATE sqlite_sequence SET seq = max(seq, ?) WHERE name = 'episodes'", (mark,)).rowcount:
        db.execute("INSERT INTO sqlite_sequence (name, seq) VALUES ('episodes', ?)", (mark,))
    if path is not None:
        lower_marks_of_files_missing_rows(db, path)


def lower_marks_of_files_missing_rows(db: sqlite3.Connection, db_path: Path) -> int:
    """Lower the mark of each vouched file that lacks a current row below it (and the manifest's); how many files.

    A failure here (an unreadable file) is one warning: `thoth doctor` still reports such a file.
    """
    manifest = read_manifest(db_path)
    if manifest is None:
        return 0
    try:
        lowered = _lower_marks(db, db_path, manifest)
    except Exception as error:  # noqa: BLE001 - the files are a cache: the migration must not fail for them
        log.warning("episodic: could not check the ANN index files of %s against the store: %s", db_path, error)
        return 0
    if lowered:
        log.info("episodic: %d ANN index files of %s miss rows they claimed; the next save adds them", lowered, db_path)
    return lowered


def _lower_marks(db: sqlite3.Connection, db_path: Path, manifest: dict[str, Any]) -> int:
    from usearch.index import Index

    lowest, lowered = int(manifest["rowid"]), 0
    for scope, meta in sidecars(db_path).items():
        index = Index.restore(str(scope_paths(db_path, scope)[0]), view=True)
        keys = np.asarray(index.keys if index is not None else [], dtype=np.int64)
        rows = db.execute(
            f"SELECT rowid FROM episodes WHERE {IN_SCOPE} AND {CURRENT} AND rowid <= ? AND vector_version <= ?",
            (*scope, int(meta["rowid"]), int(meta["vectors"])),
        ).fetchall()
        current = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        missing = current[~np.isin(current, keys[keys < FILLER_KEYS])]
        del index
        if len(missing):
            meta = {**meta, "scope": list(scope), "rowid": int(missing.min()) - 1}
            write_json(scope_paths(db_path, scope)[1], meta)
            lowest, lowered = min(lowest, int(missing.min()) - 1), lowered + 1
    if lowest < int(manifest["rowid"]):
        write_json(manifest_path(db_path), {**manifest, "rowid": lowest})
    return lowered


@contextmanager
def writers_held(db_path: Path, *, migrating: bool) -> Iterator[None]:
    """While `migrating`, hold the index writers' lock (if any writer ever ran beside the store), before SQLite's.

    Waits `LOCK_WAIT_SECONDS` at most for a running writer: a long build must not stop the store from opening.
    """
    if not migrating or not lock_path(db_path).exists():
        yield
        return
    with open(lock_path(db_path), "a") as lock:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    log.warning("episodic: an ANN index writer is still running on %s; migrating beside it", db_path)
                    yield
                    return
                time.sleep(0.1)
        yield  # released when the file closes
