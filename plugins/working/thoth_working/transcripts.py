"""Where a session's transcript entries live: a JSONL file per session, or rows of the shared store.

With SQLite (the embedded default) each session has `<root>/transcripts/<YYYY-MM-DD>/<id>.jsonl`
(dated by the session's start, UTC), one JSON object a line. With a shared PostgreSQL (`[storage]
url`) the entries are rows of `transcript_entries` (session id, sequence number, the same JSON
object), so a worker on another host answering a thread's next turn reads the whole transcript.
Both give the same entries back; a turn is stored once per session (its `turn_id`): a turn kept
cut short (replayed from the journal after a kill) and then run again with its id has its whole
reply in the cut-short entry's place (a row updated; in a file, the whole entry is appended and
reading puts it there: `one_per_turn`), and a whole one is never replaced. Several
processes may append to one session at once (two first turns of a thread share it): `guard`
holds the session against the others (a lock on its file, or an advisory lock) while one reads
and appends.
"""

from __future__ import annotations

import fcntl
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thoth_core.database import Database
from thoth_core.storage import write_atomic

logger = logging.getLogger(__name__)

TABLE_SCHEMA = """
CREATE TABLE transcript_entries (
    seq BIGSERIAL PRIMARY KEY,
    session_id TEXT NOT NULL,
    turn_id TEXT,
    entry TEXT NOT NULL
);
CREATE INDEX transcript_entries_by_session ON transcript_entries (session_id, seq);
CREATE UNIQUE INDEX transcript_entries_one_turn ON transcript_entries (session_id, turn_id);
"""
CUT_SHORT_ROW = '%"cut_short": true%'  # a LIKE pattern: a stored entry (`_dumps`) of a reply cut short
REPLACE_CUT_SHORT = (
    "ON CONFLICT (session_id, turn_id) DO UPDATE SET entry = excluded.entry WHERE transcript_entries.entry LIKE ?"
)


def day_of(started_at: float) -> str:
    """A session's day, `YYYY-MM-DD` (UTC) of its start: its transcript's folder."""
    return datetime.fromtimestamp(started_at, tz=UTC).strftime("%Y-%m-%d")


def transcript_path(root: Path, session_id: str, started_at: float) -> Path:
    """The JSONL file of a session: dated by its start (UTC)."""
    return root / "transcripts" / day_of(started_at) / f"{session_id}.jsonl"


def read_transcript(path: Path) -> list[dict[str, Any]]:
    """The entries of a transcript file; unparsable lines are skipped with a warning."""
    entries: list[dict[str, Any]] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return entries
    for number, line in enumerate(lines, start=1):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("%s:%d: not a JSON line; skipped", path, number)
    return entries


def cut_short(entry: dict[str, Any]) -> bool:
    """Whether a transcript entry holds a reply whose stream stopped early."""
    return bool(entry.get("cut_short"))


def one_per_turn(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries with one `turn` entry per turn id: a whole reply takes its cut-short one's place, else the first."""
    kept: list[dict[str, Any]] = []
    where: dict[Any, int] = {}  # turn id -> its entry's index in `kept`
    for entry in entries:
        turn_id = entry.get("turn_id") if entry.get("type") == "turn" else None
        if turn_id is None:
            kept.append(entry)
        elif turn_id not in where:
            where[turn_id] = len(kept)
            kept.append(entry)
        elif cut_short(kept[where[turn_id]]) and not cut_short(entry):
            kept[where[turn_id]] = entry
    return kept


def _end_line(path: Path) -> None:
    """End the file's last line if it is unfinished, so the next append starts a line of its own."""
    try:
        with path.open("rb+") as file:
            if file.seek(0, 2) == 0:
                return
            file.seek(-1, 2)
            if file.read(1) != b"\n":
                file.write(b"\n")
    except FileNotFoundError:
        return


def _dumps(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, default=str)


class FileTranscripts:
    """One JSONL file per session under `root` (the SQLite mode)."""

    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self._held: dict[str, int] = {}  # session id -> how deep this process holds its `guard` (the store's lock)

    def read(self, session_id: str, started_at: float) -> list[dict[str, Any]]:
        """The session's entries, in the order they were written (one `turn` entry per turn id)."""
        return one_per_turn(read_transcript(transcript_path(self.root, session_id, started_at)))

    def exists(self, session_id: str, started_at: float) -> bool:
        """Whether anything of the session is stored (a file `guard` made holds nothing yet)."""
        path = transcript_path(self.root, session_id, started_at)
        return path.exists() and path.stat().st_size > 0

    def append(
        self, session_id: str, started_at: float, entries: list[dict[str, Any]], *, mend: bool = False
    ) -> list[int]:
        """Append entries (lines as stored); `mend` first ends a half-written last line. Returns no row numbers."""
        path = transcript_path(self.root, session_id, started_at)
        path.parent.mkdir(parents=True, exist_ok=True)
        if mend:
            _end_line(path)  # a process killed mid-write may have left half a line
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(_dumps(e) + "\n" for e in entries))
        return []

    def put(self, session_id: str, started_at: float, entries: list[dict[str, Any]]) -> None:
        """Store a whole transcript made elsewhere, unless the session has one."""
        path = transcript_path(self.root, session_id, started_at)
        if entries and not path.exists():
            write_atomic(path, "".join(_dumps(e) + "\n" for e in entries))

    def delete(self, session_id: str, started_at: float) -> bool:
        """Delete the session's entries; True if there were any."""
        path = transcript_path(self.root, session_id, started_at)
        if not path.exists():
            return False
        path.unlink()
        return True

    def since(self, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
        """Entries after a row number: files have none (only the shared store numbers rows)."""
        return []

    @contextmanager
    def guard(self, session_id: str, started_at: float) -> Iterator[None]:
        """A lock on the session's file against every process: read-then-append runs alone (makes the file).

        Re-entrant within the process, whose callers hold the store's lock.
        """
        if self._held.get(session_id):
            self._held[session_id] += 1
            try:
                yield
            finally:
                self._held[session_id] -= 1
            return
        path = transcript_path(self.root, session_id, started_at)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            self._held[session_id] = 1
            try:
                yield
            finally:
                del self._held[session_id]
                fcntl.flock(held, fcntl.LOCK_UN)


class TableTranscripts:
    """The `transcript_entries` table of the shared store (the PostgreSQL mode)."""

    shared = True

    def __init__(self, db: Database) -> None:
        self.db = db

    def read(self, session_id: str, started_at: float = 0.0) -> list[dict[str, Any]]:
        """The session's entries, in the order they were written."""
        return [entry for _, entry in self.since(session_id, 0)]

    def since(self, session_id: str, after: int) -> list[tuple[int, dict[str, Any]]]:
        """The session's (row number, entry) pairs after row number `after`, in order."""
        rows = self.db.execute(
            "SELECT seq, entry FROM transcript_entries WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        ).fetchall()
        found = []
        for seq, text in rows:
            try:
                found.append((int(seq), json.loads(text)))
            except json.JSONDecodeError:
                logger.warning("%s: transcript_entries row %s: not JSON; skipped", self.db.where, seq)
        return found

    def exists(self, session_id: str, started_at: float = 0.0) -> bool:
        """Whether anything of the session is stored."""
        row = self.db.execute("SELECT 1 FROM transcript_entries WHERE session_id = ? LIMIT 1", (session_id,))
        return row.fetchone() is not None

    def append(
        self, session_id: str, started_at: float, entries: list[dict[str, Any]], *, mend: bool = False
    ) -> list[int]:
        """Append entries in one transaction; their row numbers.

        A turn already stored is skipped, unless it was stored cut short and this entry is whole:
        that row then holds the whole one (its number returned).
        """
        seqs = []
        with self.db.transaction() as tx:
            for entry in entries:
                turn_id = entry.get("turn_id") if entry.get("type") == "turn" else None
                whole = turn_id is not None and not cut_short(entry)
                row = tx.execute(
                    "INSERT INTO transcript_entries (session_id, turn_id, entry) VALUES (?, ?, ?) "
                    + (REPLACE_CUT_SHORT if whole else "ON CONFLICT DO NOTHING")
                    + " RETURNING seq",
                    (session_id, None if turn_id is None else str(turn_id), _dumps(entry), *([CUT_SHORT_ROW] * whole)),
                ).fetchone()
                if row is not None:
                    seqs.append(int(row[0]))
        return seqs

    def put(self, session_id: str, started_at: float, entries: list[dict[str, Any]]) -> None:
        """Store a whole transcript made elsewhere, unless the session has one."""
        with self.guard(session_id, started_at):
            if entries and not self.exists(session_id):
                self.append(session_id, started_at, entries)

    def delete(self, session_id: str, started_at: float = 0.0) -> bool:
        """Delete the session's entries; True if there were any."""
        return self.db.execute("DELETE FROM transcript_entries WHERE session_id = ?", (session_id,)).rowcount > 0

    @contextmanager
    def guard(self, session_id: str, started_at: float = 0.0) -> Iterator[None]:
        """A transaction holding the session's lock against every worker: read-then-append runs alone."""
        with self.db.transaction() as tx:
            tx.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"thoth_working:{session_id}",))
            yield


Transcripts = FileTranscripts | TableTranscripts
