"""Where sessions live between restarts: an SQLite index plus one JSONL transcript per session.

The index (`$THOTH_HOME/working/sessions.db`) maps (agent, workspace, peer, thread) to a session
id, its start, last activity, turn count and, once it ended for good, the reason it closed. Agents
sharing a home (`[thoth] agent`) each see only their own sessions; rows from before the agent
column belong to the default agent. The
transcript `$THOTH_HOME/working/transcripts/<YYYY-MM-DD>/<session_id>.jsonl` (date of the
session start, UTC) holds every turn, tool call and error, one JSON object a line. History is
restored from the transcript, so the conversation is stored once.

`flush(session)` appends whatever `session.transcript` gained since the last flush (turns,
errors, tool calls), so entries reach the file in the order the core recorded them. A replayed
turn (the core's stand-in session, `scratch["thoth.replay"]`, after a process was killed) goes
through `replay(session)` instead: it appends only the turns whose `turn_id` the file lacks and
recounts `turns` from the file, so a write that happened just before the kill is not repeated.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import astuple, dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thoth_core import Message, Session
from thoth_core.storage import Migration, connect, migrate, scrub, write_atomic
from thoth_core.types import DEFAULT_AGENT

logger = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    session_id TEXT PRIMARY KEY,
    workspace TEXT NOT NULL,
    peer TEXT NOT NULL,
    thread TEXT NOT NULL,
    started_at REAL NOT NULL,
    last_active REAL NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    closed TEXT
);
CREATE INDEX IF NOT EXISTS sessions_by_key ON sessions (workspace, peer, thread, last_active);
"""
AGENT_COLUMN = f"""
ALTER TABLE sessions ADD COLUMN agent TEXT NOT NULL DEFAULT '{DEFAULT_AGENT}';
CREATE INDEX sessions_by_agent ON sessions (agent, workspace, peer, thread, last_active);
"""
# Files made before the migrations were numbered have the first one's tables already (IF NOT EXISTS).
MIGRATIONS: list[Migration] = [SCHEMA, AGENT_COLUMN]

RECORDED = ("turn", "error", "tool")  # what the core puts in `session.transcript`
KEY_FIELDS = ("session_id", "agent", "workspace", "peer", "thread")  # added to each line on disk


@dataclass(frozen=True)
class StoredSession:
    """One row of the session index."""

    session_id: str
    workspace: str
    peer: str
    thread: str
    started_at: float
    last_active: float
    turns: int
    closed: str | None
    agent: str = DEFAULT_AGENT


FIELDS = [f.name for f in fields(StoredSession)]


def transcript_path(root: Path, session_id: str, started_at: float) -> Path:
    """The JSONL file of a session: dated by its start (UTC)."""
    day = datetime.fromtimestamp(started_at, tz=UTC).strftime("%Y-%m-%d")
    return root / "transcripts" / day / f"{session_id}.jsonl"


def _plain(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry as it reads back from its line: JSON round-tripped, without the key fields."""
    return {k: v for k, v in json.loads(json.dumps(entry, default=str)).items() if k not in KEY_FIELDS}


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


class SessionStore:
    """The session index and transcripts of one Thoth home; safe to use from worker threads."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.RLock()
        self._db = connect(root / "sessions.db")
        migrate(self._db, MIGRATIONS)
        self._written: dict[str, int] = {}

    def path_of(self, session: Session) -> Path:
        """The transcript file of a live session."""
        return transcript_path(self.root, session.id, session.started_at)

    def _row(self, row: tuple[Any, ...] | None) -> StoredSession | None:
        return StoredSession(*row) if row else None

    def latest_open(
        self, workspace: str, peer: str, thread: str, *, agent: str = DEFAULT_AGENT
    ) -> StoredSession | None:
        """The most recent session of this agent's key that has not closed for good."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM sessions WHERE agent=? AND workspace=? AND peer=? AND thread=? AND closed IS NULL "
                "ORDER BY last_active DESC LIMIT 1",
                (agent, workspace, peer, thread),
            ).fetchone()
        return self._row(row)

    def last_active(self, workspace: str, peer: str, *, agent: str = DEFAULT_AGENT) -> StoredSession | None:
        """The most recently active session of a peer with this agent in a workspace, any thread, open or closed."""
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM sessions WHERE agent=? AND workspace=? AND peer=? ORDER BY last_active DESC LIMIT 1",
                (agent, workspace, peer),
            ).fetchone()
        return self._row(row)

    def get(self, session_id: str) -> StoredSession | None:
        """One stored session by id."""
        with self._lock:
            return self._row(self._db.execute("SELECT * FROM sessions WHERE session_id=?", (session_id,)).fetchone())

    @staticmethod
    def history(entries: list[dict[str, Any]], *, turns: int) -> list[Message]:
        """The last `turns` turns of a stored transcript as model messages."""
        recent = [e for e in entries if e.get("type") == "turn"][-turns:] if turns > 0 else []
        return [
            m
            for e in recent
            for m in (Message("user", str(e.get("user", ""))), Message("assistant", str(e.get("assistant", ""))))
        ]

    def resume(self, session: Session, stored: StoredSession, *, turns: int) -> None:
        """Give a new session object the id, start, history and transcript of a stored one.

        The restored transcript entries count as already written, so they are not appended twice.
        """
        self.restore(session, stored, turns=turns)
        with self._lock:
            self._append(session, [{"type": "session_start", "at": time.time(), "resumed": True}])

    def restore(self, session: Session, stored: StoredSession, *, turns: int) -> None:
        """Give a session object a stored one's id, times, history and transcript (counted as written)."""
        session.id, session.started_at = stored.session_id, stored.started_at
        entries = read_transcript(transcript_path(self.root, stored.session_id, stored.started_at))
        session.history = self.history(entries, turns=turns)
        restored = [{k: v for k, v in e.items() if k not in KEY_FIELDS} for e in entries if e.get("type") in RECORDED]
        session.transcript[:0] = restored
        with self._lock:
            self._written[session.id] = len(restored)

    def claim_idle(self, before: float, *, held: set[str], agent: str = DEFAULT_AGENT) -> list[StoredSession]:
        """Close as `idle` this agent's open sessions last active before `before`, except `held` ids; each once."""
        # one UPDATE claims them: of two processes reaping at once, each row goes to exactly one
        marks = ",".join("?" * len(held))
        with self._lock:
            rows = self._db.execute(
                "UPDATE sessions SET closed='idle' WHERE closed IS NULL AND agent=? AND last_active < ? "
                f"AND session_id NOT IN ({marks}) RETURNING *",
                (agent, before, *held),
            ).fetchall()
        return sorted((StoredSession(*r) for r in rows), key=lambda s: s.last_active)

    def mark_closed(self, session_id: str, reason: str) -> None:
        """Mark a stored session ended for good: its key starts fresh next time."""
        with self._lock:
            self._db.execute("UPDATE sessions SET closed=? WHERE session_id=?", (reason, session_id))

    def flush(self, session: Session) -> int:
        """Append the session's transcript entries not yet on disk; returns how many."""
        if session.scratch.get("thoth.replay"):
            return self.replay(session)
        with self._lock:
            done = self._written.get(session.id, 0)
            entries = session.transcript[done:]
            if not entries:
                return 0
            self._append(session, entries)
            self._written[session.id] = done + len(entries)
            turns = sum(1 for e in entries if e.get("type") == "turn")
            self._db.execute(
                "INSERT INTO sessions (session_id, workspace, peer, thread, started_at, last_active, turns, agent) "
                "VALUES (?,?,?,?,?,?,?,?) "
                "ON CONFLICT(session_id) DO UPDATE SET last_active=excluded.last_active, turns=turns+?",
                (session.id, *session.key, session.started_at, session.last_active, turns, session.agent, turns),
            )
            return len(entries)

    def replay(self, session: Session) -> int:
        """Append a replayed session's turns the transcript file lacks (by `turn_id`); returns how many.

        The stand-in session holds only the replayed turn, so the flush count of the live session
        with the same id (if any) is left alone, and `turns` is recounted from the file: a process
        killed between appending a turn and counting it leaves both right after the replay.
        """
        with self._lock:
            path = self.path_of(session)
            on_disk = read_transcript(path)
            turn_ids = {e.get("turn_id") for e in on_disk if e.get("type") == "turn"}
            others = [{k: v for k, v in e.items() if k not in KEY_FIELDS} for e in on_disk if e.get("type") != "turn"]
            entries = [
                e
                for e in session.transcript
                if (e.get("turn_id") not in turn_ids if e.get("type") == "turn" else _plain(e) not in others)
            ]
            if entries:
                _end_line(path)  # a process killed mid-write may have left half a line
                self._append(session, entries)
            turns = len(turn_ids | {e.get("turn_id") for e in entries if e.get("type") == "turn"})
            self._db.execute(
                "INSERT INTO sessions (session_id, workspace, peer, thread, started_at, last_active, turns, agent) "
                "VALUES (?,?,?,?,?,?,?,?) "
                "ON CONFLICT(session_id) DO UPDATE SET last_active=max(last_active, excluded.last_active), "
                "turns=excluded.turns",
                (session.id, *session.key, session.started_at, session.last_active, turns, session.agent),
            )
            return len(entries)

    def end(self, session: Session, reason: str, *, resumable: bool) -> None:
        """Flush, write the `session_end` line and close the session unless it may resume."""
        with self._lock:
            self.flush(session)
            self._written.pop(session.id, None)
            if not self.path_of(session).exists():
                return
            self._append(session, [{"type": "session_end", "at": time.time(), "reason": reason}])
            if not resumable:
                self.mark_closed(session.id, reason)

    def _append(self, session: Session, entries: list[dict[str, Any]]) -> None:
        path = self.path_of(session)
        lines = []
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            lines.append(self._line(session, {"type": "session_start", "at": session.started_at}))
        lines += [self._line(session, e) for e in entries]
        with path.open("a", encoding="utf-8") as out:
            out.write("".join(lines))

    @staticmethod
    def _line(session: Session, entry: dict[str, Any]) -> str:
        base = {"type": entry.get("type", "note"), "at": entry.get("at", time.time()), "session_id": session.id}
        base.update(agent=session.agent, workspace=session.workspace, peer=session.peer, thread=session.thread)
        return json.dumps({**base, **entry}, ensure_ascii=False, default=str) + "\n"

    def forget(self, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
        """Delete the stored sessions and transcripts of a peer (or one thread), with every agent."""
        with self._lock:
            query = "SELECT * FROM sessions WHERE workspace=? AND peer=?" + (
                " AND thread=?" if thread is not None else ""
            )
            params = (workspace, peer) + ((thread,) if thread is not None else ())
            rows = [StoredSession(*r) for r in self._db.execute(query, params).fetchall()]
            files = 0
            for row in rows:
                path = transcript_path(self.root, row.session_id, row.started_at)
                if path.exists():
                    path.unlink()
                    files += 1
                self._written.pop(row.session_id, None)
                self._db.execute("DELETE FROM sessions WHERE session_id=?", (row.session_id,))
            erased = scrub(self._db) if rows else {}
        return {"sessions": len(rows), "transcripts": files, **erased}

    def counts(self, workspace: str, peer: str, *, agent: str = DEFAULT_AGENT) -> dict[str, int]:
        """How many sessions and turns are stored for a peer with this agent."""
        with self._lock:
            sessions, turns = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(turns), 0) FROM sessions WHERE agent=? AND workspace=? AND peer=?",
                (agent, workspace, peer),
            ).fetchone()
        return {"sessions": int(sessions), "turns": int(turns)}

    def every(self) -> list[StoredSession]:
        """Every stored session of every agent, oldest first."""
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(FIELDS)} FROM sessions ORDER BY started_at, session_id")
            return [StoredSession(*row) for row in rows.fetchall()]

    def add(self, row: StoredSession, entries: list[dict[str, Any]]) -> bool:
        """Add a session made elsewhere (its index row and transcript) unless its id is held; True if added."""
        with self._lock:
            if self.get(row.session_id) is not None:
                return False
            path = transcript_path(self.root, row.session_id, row.started_at)
            if entries and not path.exists():
                write_atomic(path, "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in entries))
            values = astuple(row)
            self._db.execute(
                f"INSERT INTO sessions ({', '.join(FIELDS)}) VALUES ({', '.join('?' for _ in values)})", values
            )
        return True

    def close(self) -> None:
        """Close the index."""
        with self._lock:
            self._db.close()
