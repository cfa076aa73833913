"""Reflection's part of `thoth bundle`: its database rows (queue, audit log, runs, check-ins), transient records,
and nightly's snapshot weights and archive."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from thoth_core import ThothError, hookimpl
from thoth_core.storage import write_atomic

from .importance import ARCHIVE_FILE, WEIGHTS_FILE
from .settings import State, state
from .transient import KINDS, STEM

SECTION = "reflection"
VERSION = 1
TABLES = ("runs", "items", "check_ins", "consolidated", "peers", "reflected", "audit")
NIGHTLY_FILES = (WEIGHTS_FILE, ARCHIVE_FILE)  # in the data folder, which the bundle's home files leave out
AUDIT_KEY = ("at", "event", "run_id", "session_id", "actor", "payload")  # audit ids are local; this is the identity


def records(st: State) -> Any:
    """The transient record folder (`reflect` loads only when a bundle is made: it is heavy for a turn)."""
    from .reflect import records as folder

    return folder(st)


def _count(st: State) -> int:
    rows = sum(st.store.query(f"SELECT COUNT(*) AS n FROM {table}")[0]["n"] for table in TABLES)
    return int(rows) + len(records(st).all()) + sum((st.dir / name).exists() for name in NIGHTLY_FILES)


@hookimpl
def bundle_export(runtime: Any) -> dict[str, Any]:
    """Every row of every table (`{"table", "row"}`), then every transient record (`{"transient", "text"}`)."""
    st = state(runtime)

    def rows() -> Iterator[dict[str, Any]]:
        for table in TABLES:
            for row in st.store.query(f"SELECT * FROM {table} ORDER BY rowid"):
                yield {"table": table, "row": row}
        for record in records(st).all():
            yield {"transient": record.id, "text": record.text()}
        for name in NIGHTLY_FILES:
            if (st.dir / name).exists():
                yield {"file": name, "text": (st.dir / name).read_text(encoding="utf-8")}

    return {"name": SECTION, "version": VERSION, "count": _count(st), "records": rows()}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Any, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add the rows (those whose key is held already are skipped) and the transient records not yet here."""
    from thoth_core.bundle import own_section

    if not own_section(section, SECTION, VERSION):
        return None
    st = state(runtime)
    columns = {t: [r["name"] for r in st.store.query(f"PRAGMA table_info({t})")] for t in TABLES}
    added: dict[str, int] = {}
    with st.store.lock:
        st.store.db.execute("BEGIN")
        try:
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
            st.store.db.execute("COMMIT")
        except BaseException:
            st.store.db.execute("ROLLBACK")
            raise
    return added


def _add_row(st: State, record: dict[str, Any], columns: dict[str, list[str]], where: str) -> str | None:
    table, row = record.get("table"), record.get("row")
    if table not in columns or not isinstance(row, dict):
        raise ThothError(f"{where}: unknown table {table!r}")
    values = {k: v for k, v in row.items() if k in columns[table] and not (table == "audit" and k == "id")}
    if table == "audit":
        match = " AND ".join(f"{k} IS ?" for k in AUDIT_KEY)
        if st.store.db.execute(f"SELECT 1 FROM audit WHERE {match}", [values.get(k) for k in AUDIT_KEY]).fetchone():
            return None
    names = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    changed = st.store.db.execute(f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})", list(values.values()))
    return table if changed.rowcount else None


def _add_transient(st: State, record_id: str, text: str, where: str) -> str | None:
    kind, _, stem = record_id.partition("/")
    if kind not in KINDS or not STEM.match(stem):
        raise ThothError(f"{where}: bad transient record id {record_id!r}")
    path = records(st).root / kind / f"{stem}.md"
    if path.exists():
        return None
    write_atomic(path, text)
    return "transient records"


def _add_nightly_file(st: State, name: str, text: str, where: str) -> str | None:
    if name not in NIGHTLY_FILES:
        raise ThothError(f"{where}: unknown reflection file {name!r}")
    path = st.dir / name
    if path.exists():
        return None
    write_atomic(path, text)
    return "nightly files"
