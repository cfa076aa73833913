"""Where sessions live between restarts: a session index plus each session's transcript.

The index (`$THOTH_HOME/working/sessions.db`, or the `thoth_working` schema of the shared
PostgreSQL with `[storage] url`) maps (agent, workspace, peer, thread) to a session id, its
start, last activity, turn count and, once it ended for good, the reason it closed. Agents
sharing a home (`[thoth] agent`) each see only their own sessions; rows from before the agent
column belong to the default agent. The transcript (a JSONL file per session, or rows of the
shared store: see `transcripts.py`) holds every turn, tool call and error, one JSON object an
entry. History is restored from the transcript, so the conversation is stored once.

`flush(session)` appends whatever `session.transcript` gained since the last flush (turns,
errors, tool calls), so entries are stored in the order the core recorded them. A replayed
turn (the core's stand-in session, `scratch["thoth.replay"]`, after a process was killed) goes
through `replay(session)` instead: it appends only the turns whose `turn_id` the transcript
lacks (or holds cut short) and recounts `turns` from it, so a write that happened just before the
kill is not repeated. A turn kept cut short and run again with its id (a Slack message re-run by
another worker) leaves one entry, the whole reply in the cut-short one's place
(`take_back_cut_short`, `transcripts.one_per_turn`). With a shared store, several workers may
answer one thread in turn: `catch_up` brings into a live session the turns other workers stored
since it last looked.

A key has at most one open session, whichever process opens it (a unique index on the open rows):
`open` inserts the new session's row at once or adopts the one another process inserted first, so
two first turns of a thread share one session. An open session idle past the limit is set aside
as `expired` first; the idle reaper (`claim_idle`) ends it like any idle one. A turn whose session
never got a row (its process could not write then) joins the key's open session when replayed.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

from thoth_core import Message, Session, ThothError
from thoth_core.config import Config
from thoth_core.database import open_database
from thoth_core.storage import Migration
from thoth_core.types import DEFAULT_AGENT

from .transcripts import (
    TABLE_SCHEMA,
    FileTranscripts,
    TableTranscripts,
    cut_short,
    read_transcript,
    transcript_path,
)
from .turn_context import ContextLog

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
# One open session per (agent, workspace, peer, thread), whichever process opens it: older open duplicates
# (made before this rule) wait as `expired` for the idle reaper, which ends and so reflects on them.
ONE_OPEN = """
UPDATE sessions SET closed='expired' WHERE closed IS NULL AND EXISTS (
    SELECT 1 FROM sessions newer WHERE newer.closed IS NULL AND newer.agent = sessions.agent
    AND newer.workspace = sessions.workspace AND newer.peer = sessions.peer AND newer.thread = sessions.thread
    AND (newer.last_active > sessions.last_active
         OR (newer.last_active = sessions.last_active AND newer.session_id > sessions.session_id)));
CREATE UNIQUE INDEX sessions_one_open ON sessions (agent, workspace, peer, thread) WHERE closed IS NULL;
"""
# Which plugins' context each recent model turn went without (`turn_context.py`), for every process to count.
TURN_CONTEXT = """
CREATE TABLE turn_context (turn_id TEXT PRIMARY KEY, at REAL NOT NULL, agent TEXT NOT NULL, missing TEXT NOT NULL);
CREATE INDEX turn_context_by_time ON turn_context (at);
"""
# Files made before the migrations were numbered have the first one's tables already (IF NOT EXISTS).
MIGRATIONS: list[Migration] = [SCHEMA, AGENT_COLUMN, ONE_OPEN, TURN_CONTEXT]
POSTGRES = [
    f"""
    CREATE TABLE sessions (
        session_id TEXT PRIMARY KEY,
        workspace TEXT NOT NULL,
        peer TEXT NOT NULL,
        thread TEXT NOT NULL,
        started_at DOUBLE PRECISION NOT NULL,
        last_active DOUBLE PRECISION NOT NULL,
        turns INTEGER NOT NULL DEFAULT 0,
        closed TEXT,
        agent TEXT NOT NULL DEFAULT '{DEFAULT_AGENT}'
    );
    CREATE INDEX sessions_by_agent ON sessions (agent, workspace, peer, thread, last_active);
    {TABLE_SCHEMA}
    """,
    ONE_OPEN,
    TURN_CONTEXT.replace("REAL", "DOUBLE PRECISION"),
]

EXPIRED = "expired"  # closed to new turns, waiting for the idle reaper to end it
OPEN_TRIES = 5  # set-asides and lost races `open` goes through before it gives up (each is another process's step)
INSERT_OPEN = (
    "INSERT INTO sessions (session_id, workspace, peer, thread, started_at, last_active, turns, agent) "
    "VALUES (?,?,?,?,?,?,0,?) ON CONFLICT DO NOTHING"
)
RECORDED = ("turn", "error", "tool")  # what the core puts in `session.transcript`
ENDED_COUNTS_KEPT = 1000  # ended sessions whose written count `flush` still knows (late writes come in seconds)
KEY_FIELDS = ("session_id", "agent", "workspace", "peer", "thread")  # added to each stored entry


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
COLUMNS = ", ".join(FIELDS)
UPSERT = (
    "INSERT INTO sessions (session_id, workspace, peer, thread, started_at, last_active, turns, agent) "
    "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (session_id) DO UPDATE SET "
)


def _plain(entry: dict[str, Any]) -> dict[str, Any]:
    """An entry as it reads back: JSON round-tripped, without the key fields."""
    return {k: v for k, v in json.loads(json.dumps(entry, default=str)).items() if k not in KEY_FIELDS}


class SessionStore:
    """The session index and transcripts of one Thoth home (or shared store); safe to use from worker threads."""

    def __init__(self, root: Path, config: Any = None) -> None:
        self.root = root
        self._lock = threading.RLock()
        config = config if config is not None else Config(data={})
        path = root / "sessions.db"
        self._db = open_database(config, "working", path=path, migrations=MIGRATIONS, postgres=POSTGRES)
        self.shared = self._db.dialect == "postgres"
        self.errors = self._db.errors  # what a failed read or write raises
        self.transcripts = TableTranscripts(self._db) if self.shared else FileTranscripts(root)
        self.context_log = ContextLog(self._db, self._lock)  # which plugins' context recent turns went without
        self._written: dict[str, int] = {}  # session id -> entries of its `transcript` stored
        self._ended: deque[str] = deque()  # ended sessions whose count is kept for a post-turn write still running
        self._seen: dict[str, int] = {}  # session id -> last transcript row read (shared store)
        self._mine: dict[str, set[int]] = {}  # session id -> rows this process stored since then (shared store)
        self._indexed: set[str] = set()  # live sessions known to have their row
        self._rerun: dict[str, set[str]] = {}  # session id -> turns run again whose cut-short version is stored

    def path_of(self, session: Session) -> Path:
        """The transcript file of a live session (SQLite mode)."""
        return transcript_path(self.root, session.id, session.started_at)

    def entries(self, session_id: str, started_at: float) -> list[dict[str, Any]]:
        """Every stored transcript entry of a session, in order (from its file or the shared store)."""
        return self.transcripts.read(session_id, started_at)

    def _one(self, sql: str, params: tuple[Any, ...]) -> StoredSession | None:
        with self._lock:
            row = self._db.execute(f"SELECT {COLUMNS} FROM sessions WHERE {sql}", params).fetchone()
        return StoredSession(*row) if row else None

    def latest_open(
        self, workspace: str, peer: str, thread: str, *, agent: str = DEFAULT_AGENT
    ) -> StoredSession | None:
        """The most recent session of this agent's key that has not closed for good."""
        return self._one(
            "agent=? AND workspace=? AND peer=? AND thread=? AND closed IS NULL ORDER BY last_active DESC LIMIT 1",
            (agent, workspace, peer, thread),
        )

    def open(
        self, session: Session, *, idle_seconds: float, ending: Callable[[str], bool] = lambda _id: False
    ) -> StoredSession | None:
        """Make `session` its key's open session, or return the open one another process made (to resume).

        Atomic across processes: of two first turns at once, one inserts and the other adopts. An
        open session idle for `idle_seconds` is set aside as `expired` (for the reaper), one this
        runtime is `ending` as `ended` (its `session_end` writes the real reason), then it tries again.
        """
        for _ in range(OPEN_TRIES):
            stored = self.latest_open(*session.key, agent=session.agent)
            if stored is None:
                with self._lock:
                    params = (session.id, *session.key, session.started_at, session.last_active, session.agent)
                    if self._db.execute(INSERT_OPEN, params).rowcount:
                        self._indexed.add(session.id)
                        return None
                continue  # another process opened one first: adopt it
            if ending(stored.session_id):
                self._set_aside(stored.session_id, "ended")
            elif time.time() - stored.last_active >= idle_seconds:
                self._set_aside(stored.session_id, EXPIRED)
            else:
                self._indexed.add(stored.session_id)
                return stored
        raise ThothError(f"session {session.id}: other processes kept opening and closing its thread; not indexed")

    def _set_aside(self, session_id: str, reason: str) -> None:
        with self._lock:
            self._db.execute("UPDATE sessions SET closed=? WHERE session_id=? AND closed IS NULL", (reason, session_id))

    def _index(self, session: Session) -> None:
        """Give a live session that has no row yet (its start could not write one) the key's open row."""
        with self._lock:
            if session.id in self._indexed or self.get(session.id) is not None:
                self._indexed.add(session.id)
                return
            for _ in range(OPEN_TRIES):  # it takes over: the other open session waits for the reaper
                self._db.execute(
                    "UPDATE sessions SET closed=? WHERE closed IS NULL AND agent=? AND workspace=? AND peer=? "
                    "AND thread=?",
                    (EXPIRED, session.agent, *session.key),
                )
                params = (session.id, *session.key, session.started_at, session.last_active, session.agent)
                if self._db.execute(INSERT_OPEN, params).rowcount:
                    self._indexed.add(session.id)
                    return
            raise ThothError(f"session {session.id}: its thread's open session kept changing; not indexed")

    def _joined(self, session: Session) -> Session:
        """The session a replayed turn is written to: its own, or the key's open one if its own has no row."""
        if self.get(session.id) is not None:
            return session
        stored = self.open(session, idle_seconds=float("inf"))
        if stored is None:
            return session
        logger.info(
            "working: replayed turns of session %s join the thread's open session %s", session.id, stored.session_id
        )
        return dataclasses.replace(session, id=stored.session_id, started_at=stored.started_at)

    def last_active(self, workspace: str, peer: str, *, agent: str = DEFAULT_AGENT) -> StoredSession | None:
        """The most recently active session of a peer with this agent in a workspace with a turn, any thread."""
        return self._one(
            "agent=? AND workspace=? AND peer=? AND turns > 0 ORDER BY last_active DESC LIMIT 1",
            (agent, workspace, peer),
        )

    def sessions_of(
        self, workspace: str, peer: str, *, agent: str = DEFAULT_AGENT, limit: int, before: float | None = None
    ) -> list[StoredSession]:
        """A peer's sessions with a turn, most recently active first (active before `before`, if given)."""
        where = "agent=? AND workspace=? AND peer=? AND turns > 0"
        params: list[Any] = [agent, workspace, peer]
        if before is not None:
            where += " AND last_active < ?"
            params.append(before)
        with self._lock:
            rows = self._db.execute(
                f"SELECT {COLUMNS} FROM sessions WHERE {where} ORDER BY last_active DESC, session_id LIMIT ?",
                (*params, int(limit)),
            ).fetchall()
        return [StoredSession(*row) for row in rows]

    def get(self, session_id: str) -> StoredSession | None:
        """One stored session by id."""
        return self._one("session_id=?", (session_id,))

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
        numbered = self.transcripts.since(stored.session_id, 0)  # files number no rows: none
        entries = [e for _, e in numbered] if self.shared else self.entries(stored.session_id, stored.started_at)
        session.history = self.history(entries, turns=turns)
        restored = [{k: v for k, v in e.items() if k not in KEY_FIELDS} for e in entries if e.get("type") in RECORDED]
        session.transcript[:0] = restored
        with self._lock:
            self._written[session.id] = len(restored)
            if numbered:
                self._seen[session.id] = numbered[-1][0]

    def catch_up(self, session: Session, *, turns: int) -> int:
        """Bring into a live session what other workers stored since it last looked (shared store); how many entries.

        Call it right after `flush`: the new entries go after the session's own, counted as written.
        """
        if not self.shared:
            return 0
        with self._lock:
            mine = self._mine.pop(session.id, set())
            found = self.transcripts.since(session.id, self._seen.get(session.id, 0))
            if found:
                self._seen[session.id] = found[-1][0]
            known = {e.get("turn_id") for e in session.transcript if e.get("type") == "turn"}
            foreign = [
                {k: v for k, v in e.items() if k not in KEY_FIELDS}
                for seq, e in found
                if seq not in mine
                and e.get("type") in RECORDED
                and not (e.get("type") == "turn" and e.get("turn_id") in known)
            ]
            if not foreign:
                return 0
            session.transcript += foreign
            self._written[session.id] = self._written.get(session.id, 0) + len(foreign)
            history = session.history + self.history(foreign, turns=len(foreign))
            session.history = history[-2 * turns :] if turns > 0 else []
            session.last_active = max(session.last_active, max(float(e.get("at") or 0) for e in foreign))
        return len(foreign)

    def claim_idle(self, before: float, *, held: set[str], agent: str = DEFAULT_AGENT) -> list[StoredSession]:
        """Close as `idle` this agent's open sessions last active before `before` and its `expired` ones,
        except `held` ids; each once."""
        # one UPDATE claims them: of two processes reaping at once, each row goes to exactly one
        unheld = f" AND session_id NOT IN ({','.join('?' * len(held))})" if held else ""
        with self._lock:
            rows = self._db.execute(
                "UPDATE sessions SET closed='idle' WHERE agent=? "
                f"AND ((closed IS NULL AND last_active < ?) OR closed=?){unheld} RETURNING {COLUMNS}",
                (agent, before, EXPIRED, *held),
            ).fetchall()
        return sorted((StoredSession(*r) for r in rows), key=lambda s: s.last_active)

    def mark_closed(self, session_id: str, reason: str) -> None:
        """Mark a stored session ended for good: its key starts fresh next time."""
        with self._lock:
            self._db.execute("UPDATE sessions SET closed=? WHERE session_id=?", (reason, session_id))

    def flush(self, session: Session) -> int:
        """Append the session's transcript entries not yet stored; returns how many."""
        if session.scratch.get("thoth.replay"):
            return self.replay(session)
        with self._lock:
            done = self._written.get(session.id, 0)
            entries = session.transcript[done:]
            if not entries:
                return 0
            self._index(session)
            self._append(session, entries)
            self._written[session.id] = done + len(entries)
            again = self._rerun.pop(session.id, set())  # turns stored cut short: counted already
            turns = sum(1 for e in entries if e.get("type") == "turn" and e.get("turn_id") not in again)
            self._db.execute(
                UPSERT + "last_active=excluded.last_active, turns=sessions.turns+?",
                (session.id, *session.key, session.started_at, session.last_active, turns, session.agent, turns),
            )
            return len(entries)

    def take_back_cut_short(self, session: Session, turn_id: str) -> bool:
        """A turn kept cut short is run again (same id): take its cut-short version out of the live session.

        Its history pair and transcript entry go, so the model is not shown the message answered
        already; the whole reply, once flushed, takes the stored entry's place (`one_per_turn`),
        not counted as another turn. False when the session holds no cut-short turn of that id.
        """
        with self._lock:
            found = next(
                (
                    i
                    for i, e in enumerate(session.transcript)
                    if e.get("type") == "turn" and e.get("turn_id") == turn_id and cut_short(e)
                ),
                None,
            )
            if found is None:
                return False
            entry = session.transcript.pop(found)
            if found < self._written.get(session.id, 0):
                self._written[session.id] -= 1
            self._rerun.setdefault(session.id, set()).add(turn_id)
            pair = [Message("user", str(entry.get("user", ""))), Message("assistant", str(entry.get("assistant", "")))]
            history = session.history
            at = next((i for i in range(len(history) - 2, -1, -1) if history[i : i + 2] == pair), None)
            if at is not None:
                session.history = history[:at] + history[at + 2 :]
            return True

    def _keep_count(self, session_id: str) -> None:
        """Keep an ended session's written count a while: its last turn's post-turn write may flush after the end."""
        if len(self._ended) >= ENDED_COUNTS_KEPT:
            self._written.pop(self._ended.popleft(), None)
        self._ended.append(session_id)

    def replay(self, session: Session) -> int:
        """Append a replayed session's turns the transcript lacks (by `turn_id`), or holds cut short; how many.

        The stand-in session holds only the replayed turn, so the flush count of the live session
        with the same id (if any) is left alone, and `turns` is recounted from the transcript: a
        process killed between appending a turn and counting it leaves both right after the replay.
        A turn whose session has no row joins the key's open session (`_joined`).
        """
        session = self._joined(session)
        with self._lock, self.transcripts.guard(session.id, session.started_at):
            stored = self.entries(session.id, session.started_at)
            turn_ids = {e.get("turn_id") for e in stored if e.get("type") == "turn"}
            cut = {e.get("turn_id") for e in stored if e.get("type") == "turn" and cut_short(e)}
            others = [{k: v for k, v in e.items() if k not in KEY_FIELDS} for e in stored if e.get("type") != "turn"]
            entries = [
                e
                for e in session.transcript
                if (
                    e.get("turn_id") not in turn_ids or (e.get("turn_id") in cut and not cut_short(e))
                    if e.get("type") == "turn"
                    else _plain(e) not in others
                )
            ]
            if entries:
                self._append(session, entries, mend=True, own=False)
            turns = len(turn_ids | {e.get("turn_id") for e in entries if e.get("type") == "turn"})
            self._db.execute(
                UPSERT + "last_active=CASE WHEN excluded.last_active > sessions.last_active "
                "THEN excluded.last_active ELSE sessions.last_active END, turns=excluded.turns",
                (session.id, *session.key, session.started_at, session.last_active, turns, session.agent),
            )
            return len(entries)

    def end(self, session: Session, reason: str, *, resumable: bool) -> None:
        """Flush, store the `session_end` entry and close the session unless it may resume."""
        with self._lock:
            self.flush(session)
            for known in (self._seen, self._mine):
                known.pop(session.id, None)
            self._keep_count(session.id)
            self._indexed.discard(session.id)
            if not self.transcripts.exists(session.id, session.started_at):
                if not resumable:  # opened, never written to: nothing to keep
                    self._db.execute("DELETE FROM sessions WHERE session_id=? AND turns=0", (session.id,))
                    self.mark_closed(session.id, reason)
                return
            self._append(session, [{"type": "session_end", "at": time.time(), "reason": reason}], exists=True)
            if not resumable:
                self.mark_closed(session.id, reason)

    def _append(
        self,
        session: Session,
        entries: list[dict[str, Any]],
        *,
        mend: bool = False,
        own: bool = True,
        exists: bool | None = None,
    ) -> None:
        """Store entries (with the key fields), after a `session_start` if the session has nothing stored yet.

        `own` rows are the live session's: `catch_up` does not bring them in again (a replay's are not).
        """
        with self.transcripts.guard(session.id, session.started_at):
            if exists is None:
                exists = self.transcripts.exists(session.id, session.started_at)
            lines = [] if exists else [self._line(session, {"type": "session_start", "at": session.started_at})]
            lines += [self._line(session, e) for e in entries]
            rows = self.transcripts.append(session.id, session.started_at, lines, mend=mend)
        if rows and own:
            self._mine.setdefault(session.id, set()).update(rows)

    @staticmethod
    def _line(session: Session, entry: dict[str, Any]) -> dict[str, Any]:
        base = {"type": entry.get("type", "note"), "at": entry.get("at", time.time()), "session_id": session.id}
        base.update(agent=session.agent, workspace=session.workspace, peer=session.peer, thread=session.thread)
        return {**base, **entry}

    def forget(self, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
        """Delete the stored sessions and transcripts of a peer (or one thread), with every agent."""
        with self._lock:
            query = f"SELECT {COLUMNS} FROM sessions WHERE workspace=? AND peer=?" + (
                " AND thread=?" if thread is not None else ""
            )
            params = (workspace, peer) + ((thread,) if thread is not None else ())
            rows = [StoredSession(*r) for r in self._db.execute(query, params).fetchall()]
            files = held = 0  # held: sessions with anything stored (one opened and never written to is not)
            for row in rows:
                deleted = self.transcripts.delete(row.session_id, row.started_at)
                files += deleted
                held += bool(deleted or row.turns)
                for known in (self._written, self._seen, self._mine):
                    known.pop(row.session_id, None)
                self._indexed.discard(row.session_id)
                self._db.execute("DELETE FROM sessions WHERE session_id=?", (row.session_id,))
            erased = self._db.scrub(tables=["sessions", "transcript_entries"] if self.shared else []) if rows else {}
        return {"sessions": held, "transcripts": files, **erased}

    def counts(self, workspace: str, peer: str, *, agent: str = DEFAULT_AGENT) -> dict[str, int]:
        """How many sessions (with a turn) and turns are stored for a peer with this agent."""
        with self._lock:
            sessions, turns = self._db.execute(
                "SELECT COUNT(*), COALESCE(SUM(turns), 0) FROM sessions WHERE agent=? AND workspace=? AND peer=? "
                "AND turns > 0",
                (agent, workspace, peer),
            ).fetchone()
        return {"sessions": int(sessions), "turns": int(turns)}

    def every(self) -> list[StoredSession]:
        """Every stored session of every agent, oldest first."""
        with self._lock:
            rows = self._db.execute(f"SELECT {COLUMNS} FROM sessions ORDER BY started_at, session_id")
            return [StoredSession(*row) for row in rows.fetchall()]

    def add(self, row: StoredSession, entries: list[dict[str, Any]]) -> bool:
        """Add a session made elsewhere (its index row and transcript) unless its id is held; True if added.

        An open one whose thread has an open session here comes in closed (`superseded`): one open per thread.
        """
        insert = f"INSERT INTO sessions ({COLUMNS}) VALUES ({', '.join('?' for _ in FIELDS)}) ON CONFLICT DO NOTHING"
        with self._lock:
            if self.get(row.session_id) is not None:
                return False
            self.transcripts.put(row.session_id, row.started_at, entries)
            added = self._db.execute(insert, astuple(row)).rowcount
            if not added and row.closed is None and self.get(row.session_id) is None:
                added = self._db.execute(insert, astuple(dataclasses.replace(row, closed="superseded"))).rowcount
        return bool(added)

    def close(self) -> None:
        """Close the index."""
        with self._lock:
            self._db.close()


__all__ = ["FIELDS", "SessionStore", "StoredSession", "read_transcript", "transcript_path"]
