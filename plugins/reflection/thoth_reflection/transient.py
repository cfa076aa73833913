"""Transient records: one markdown file per reflection run or failed validation, pruned after N days or N entries.

Layout `$THOTH_HOME/reflection/transient/<kind>/<YYYY-MM-DD>-<session>-<run>.md`; a record's
id is `<kind>/<file stem>`. A record waiting for promotion into `knowledge/` is kept and does
not count towards the entry limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

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

    def prune(self, *, now: float, days: int, keep: set[str], most: int | None = None) -> list[str]:
        """Delete records older than `days`, then the oldest beyond `most`, except those in keep; returns their ids."""
        cutoff = datetime.fromtimestamp(now - days * 86400, UTC).strftime("%Y-%m-%d")
        candidates = [record for record in self.all() if record.id not in keep]
        extra = max(0, len(candidates) - most) if most is not None else 0
        gone = []
        for n, record in enumerate(candidates):
            if n < extra or record.day < cutoff:
                record.path.unlink(missing_ok=True)
                gone.append(record.id)
        return gone

    def delete_sessions(self, session_ids: set[str]) -> int:
        """Delete the records of these sessions (for forget); returns how many."""
        count = 0
        for record in self.all():
            if records_of(record.id, session_ids):
                record.path.unlink(missing_ok=True)
                count += 1
        return count


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
