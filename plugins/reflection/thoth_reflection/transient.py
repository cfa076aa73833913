"""Transient records: one markdown file per reflection run or failed validation, pruned after N days or N entries.

Layout `$THOTH_HOME/reflection/transient/<kind>/<YYYY-MM-DD>-<session>-<run>.md`; a record's
id is `<kind>/<file stem>`. A record waiting for promotion into `knowledge/` is kept and does
not count towards the entry limit. With a shared store (`[storage] url`) the records are rows of
its `transient` table instead (`StoredRecords`, same ids and methods), so every worker sees them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thoth_core.storage import write_atomic

KINDS = ("reflection", "validation")
STEM = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})-[\w\-]+$")


@dataclass(frozen=True)
class Record:
    """One transient record file."""

    id: str
    kind: str
    day: str
    path: Path

    def text(self) -> str:
        """The record's markdown."""
        return self.path.read_text(encoding="utf-8")


class TransientRecords:
    """The transient record folder of one runtime."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, kind: str, *, day: str, session_id: str, run_id: str, text: str) -> Record:
        """Write one record; returns it."""
        assert kind in KINDS, kind
        stem = f"{day}-{_safe(session_id)}-{_safe(run_id)}"
        path = self.root / kind / f"{stem}.md"
        write_atomic(path, text)
        return Record(f"{kind}/{stem}", kind, day, path)

    def all(self) -> list[Record]:
        """Every record, oldest first (by day, then by when the file was written)."""
        records = []
        for kind in KINDS:
            for path in sorted((self.root / kind).glob("*.md")):
                match = STEM.match(path.stem)
                if match:
                    records.append(Record(f"{kind}/{path.stem}", kind, match.group("day"), path))
        return sorted(records, key=lambda r: (r.day, _written(r.path), r.id))

    def get(self, record_id: str) -> Record | None:
        """A record by id, or None (ids with path tricks are never resolved)."""
        kind, _, stem = record_id.partition("/")
        if kind not in KINDS or not STEM.match(stem):
            return None
        path = self.root / kind / f"{stem}.md"
        return Record(record_id, kind, stem[:10], path) if path.exists() else None

    def put(self, record_id: str, text: str) -> bool:
        """Add a record by id (from a bundle) unless one is here; False when it was (ValueError for a bad id)."""
        kind, _, stem = _checked(record_id)
        path = self.root / kind / f"{stem}.md"
        if path.exists():
            return False
        write_atomic(path, text)
        return True

    def prune(self, *, now: float, days: int, keep: set[str], most: int | None = None) -> list[str]:
        """Delete records older than `days`, then the oldest beyond `most`, except those in keep; returns their ids."""
        gone = doomed(self.all(), now=now, days=days, keep=keep, most=most)
        for record in gone:
            record.path.unlink(missing_ok=True)
        return [record.id for record in gone]

    def delete_sessions(self, session_ids: set[str]) -> int:
        """Delete the records of these sessions (for forget); returns how many."""
        count = 0
        for record in self.all():
            if records_of(record.id, session_ids):
                record.path.unlink(missing_ok=True)
                count += 1
        return count


@dataclass(frozen=True)
class StoredRecord:
    """One transient record in the shared store."""

    id: str
    kind: str
    day: str
    body: str
    path: str  # where it lives, for people

    def text(self) -> str:
        """The record's markdown."""
        return self.body


class StoredRecords:
    """The transient records of a shared store (its `transient` table); the methods of `TransientRecords`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def _record(self, row: dict[str, Any]) -> StoredRecord:
        where = f"{self.store.db.where}, transient row {row['id']}"
        return StoredRecord(row["id"], row["kind"], row["day"], row["text"], where)

    def write(self, kind: str, *, day: str, session_id: str, run_id: str, text: str) -> StoredRecord:
        """Write one record; returns it."""
        assert kind in KINDS, kind
        record_id = f"{kind}/{day}-{_safe(session_id)}-{_safe(run_id)}"
        self.store.execute(
            "INSERT INTO transient (id, kind, day, session_id, run_id, text, at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET text = excluded.text, at = excluded.at",
            record_id,
            kind,
            day,
            session_id,
            run_id,
            text,
            time.time(),
        )
        return self._record({"id": record_id, "kind": kind, "day": day, "text": text})

    def all(self) -> list[StoredRecord]:
        """Every record, oldest first (by day, then by when it was written)."""
        return [self._record(row) for row in self.store.query("SELECT * FROM transient ORDER BY day, at, id")]

    def get(self, record_id: str) -> StoredRecord | None:
        """A record by id, or None."""
        rows = self.store.query("SELECT * FROM transient WHERE id = ?", record_id)
        return self._record(rows[0]) if rows else None

    def put(self, record_id: str, text: str) -> bool:
        """Add a record by id (from a bundle) unless one is here; False when it was (ValueError for a bad id)."""
        kind, day, _ = _checked(record_id)
        added = self.store.execute(
            "INSERT INTO transient (id, kind, day, session_id, run_id, text, at) VALUES (?, ?, ?, '', '', ?, ?)"
            " ON CONFLICT (id) DO NOTHING",
            record_id,
            kind,
            day,
            text,
            time.time(),
        )
        return added == 1

    def prune(self, *, now: float, days: int, keep: set[str], most: int | None = None) -> list[str]:
        """Delete records older than `days`, then the oldest beyond `most`, except those in keep; returns their ids."""
        gone = [record.id for record in doomed(self.all(), now=now, days=days, keep=keep, most=most)]
        self._delete(gone)
        return gone

    def delete_sessions(self, session_ids: set[str]) -> int:
        """Delete the records of these sessions (for forget); returns how many."""
        gone = [record.id for record in self.all() if records_of(record.id, session_ids)]
        self._delete(gone)
        return len(gone)

    def _delete(self, ids: list[str]) -> None:
        with self.store.lock, self.store.db.transaction():
            for record_id in ids:
                self.store.execute("DELETE FROM transient WHERE id = ?", record_id)


def doomed(records: list[Any], *, now: float, days: int, keep: set[str], most: int | None) -> list[Any]:
    """The records a prune deletes: older than `days`, then the oldest beyond `most`, never those in keep."""
    cutoff = datetime.fromtimestamp(now - days * 86400, UTC).strftime("%Y-%m-%d")
    candidates = [record for record in records if record.id not in keep]
    extra = max(0, len(candidates) - most) if most is not None else 0
    return [record for n, record in enumerate(candidates) if n < extra or record.day < cutoff]


def _checked(record_id: str) -> tuple[str, str, str]:
    """(kind, day, stem) of a well-formed record id; ValueError otherwise."""
    kind, _, stem = record_id.partition("/")
    if kind not in KINDS or not STEM.match(stem):
        raise ValueError(f"bad transient record id {record_id!r}")
    return kind, stem[:10], stem


def records_of(record_id: str, session_ids: set[str]) -> bool:
    """Whether a record id names one of these sessions."""
    return any(f"-{_safe(s)}-" in record_id for s in session_ids)


def _written(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _safe(value: str) -> str:
    return re.sub(r"[^\w\-]", "_", value)[:64]
