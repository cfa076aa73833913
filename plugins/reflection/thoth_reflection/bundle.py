"""Reflection's part of `thoth bundle`: its database rows (queue, audit log, runs, check-ins), transient records,
and nightly's snapshot weights and archive (files, or rows of the shared store: `documents`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from thoth_core import BundleSection, ThothError, hookimpl

from .documents import documents
from .importance import ARCHIVE_FILE, WEIGHTS_FILE
from .settings import State, state

if TYPE_CHECKING:
    from thoth_core import Runtime

SECTION = "reflection"
VERSION = 1
TABLES = ("runs", "items", "check_ins", "consolidated", "peers", "reflected", "audit")
NIGHTLY_FILES = (WEIGHTS_FILE, ARCHIVE_FILE)  # in the data folder, which the bundle's home files leave out
AUDIT_KEY = ("at", "event", "run_id", "session_id", "actor", "payload")  # audit ids are local; this is the identity
ORDER = {  # insertion order in the shared store, which has no rowid
    "runs": "started_at, run_id",
    "items": "created_at, id",
    "check_ins": "at, id",
    "consolidated": "at, key",
    "peers": "last_seen, peer",
    "reflected": "at, session_id",
    "audit": "id",
}


def records(st: State) -> Any:
    """The transient record folder (`reflect` loads only when a bundle is made: it is heavy for a turn)."""
    from .reflect import records as folder

    return folder(st)


def _count(st: State) -> int:
    rows = sum(st.store.query(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"] for table in TABLES)
    return int(rows) + len(records(st).all()) + sum(documents(st).read(name) is not None for name in NIGHTLY_FILES)


def _columns(st: State, table: str) -> list[str]:
    """A table's column names, in either dialect."""
    if not st.store.shared:
        return [r["name"] for r in st.store.query(f"PRAGMA table_info({table})")]
    sql = "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() AND table_name = ?"
    return [r["column_name"] for r in st.store.query(sql, table)]


@hookimpl
def bundle_export(runtime: Runtime) -> BundleSection:
    """Every row of every table (`{"table", "row"}`), then every transient record (`{"transient", "text"}`)."""
    st = state(runtime)

    def rows() -> Iterator[dict[str, Any]]:
        for table in TABLES:
            order = ORDER[table] if st.store.shared else "rowid"
            for row in st.store.query(f"SELECT * FROM {table} ORDER BY {order}"):
                yield {"table": table, "row": row}
        for record in records(st).all():
            yield {"transient": record.id, "text": record.text()}
        for name in NIGHTLY_FILES:
            text = documents(st).read(name)
            if text is not None:
                yield {"file": name, "text": text}

    return {"name": SECTION, "version": VERSION, "count": _count(st), "records": rows()}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add the rows (those whose key is held already are skipped) and the transient records not yet here."""
    from thoth_core.bundle import own_section

    if not own_section(section, SECTION, VERSION):
        return None
    st = state(runtime)
    columns = {t: _columns(st, t) for t in TABLES}
    added: dict[str, int] = {}
    with st.store.lock, st.store.db.transaction():
        for number, record in enumerate(section["records"], 1):
            where = f"bundle section {SECTION}: record {number}"
            if "transient" in record:
                kind = _add_transient(st, str(record["transient"]), str(record.get("text", "")), where)
            elif "file" in record:
                kind = _add_nightly_file(st, str(record["file"]), str(record.get("text", "")), where)
            else:
                kind = _add_row(st, record, columns, where)
            if kind:
                added[kind] = added.get(kind, 0) + 1
            progress(1)
    return added


def _add_row(st: State, record: dict[str, Any], columns: dict[str, list[str]], where: str) -> str | None:
    table, row = record.get("table"), record.get("row")
    if table not in columns or not isinstance(row, dict):
        raise ThothError(f"{where}: unknown table {table!r}")
    values = {k: v for k, v in row.items() if k in columns[table] and not (table == "audit" and k == "id")}
    if table == "audit":
        known = [(k, values.get(k)) for k in AUDIT_KEY]
        match = " AND ".join(f"{k} IS NULL" if v is None else f"{k} = ?" for k, v in known)
        if st.store.query(f"SELECT 1 FROM audit WHERE {match}", *[v for _, v in known if v is not None]):
            return None
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    changed = st.store.execute(
        f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT DO NOTHING", *values.values()
    )
    return table if changed else None


def _add_transient(st: State, record_id: str, text: str, where: str) -> str | None:
    try:
        added = records(st).put(record_id, text)
    except ValueError as exc:
        raise ThothError(f"{where}: {exc}") from exc
    return "transient records" if added else None


def _add_nightly_file(st: State, name: str, text: str, where: str) -> str | None:
    if name not in NIGHTLY_FILES:
        raise ThothError(f"{where}: unknown reflection file {name!r}")
    if documents(st).read(name) is not None:
        return None
    documents(st).write(name, text)
    return "nightly files"
