"""The durable inbox: every message the agent should answer, kept in the ledger's store before Slack is acked.

Several workers (processes, hosts) can serve one Slack app on one shared store. Each delivery is
inserted once under its request key (`INSERT ... ON CONFLICT DO NOTHING`), so Slack's retries,
redeliveries and a second worker given the same event add nothing. A thread's pending messages
are answered in order (Slack ts, then arrival) by whichever worker holds the thread's *claim*: a
row with an owner and an expiry that the holder renews while it works. A worker killed mid-turn
stops renewing; once its claim expires any worker's sweep takes the thread over, and a message
whose placeholder was already posted gets that placeholder updated rather than a second reply.

The text is stored as the runtime's `[privacy]` redactor keeps it (the receiving worker answers
from the raw text it holds in memory; a worker that takes over answers from the stored text) and
is cleared once answered; answered rows keep only ids and ts, for `SEEN_KEEP_SECONDS`.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass
from typing import Any

from thoth_core.database import Database

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # a message whose turn kept killing its worker is given up after this many starts
PENDING, DONE, FAILED = "pending", "done", "failed"

SQLITE_SCHEMA = """
CREATE TABLE inbox (
    seq INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, thread TEXT NOT NULL, ts TEXT NOT NULL,
    sent REAL NOT NULL, team TEXT NOT NULL, peer TEXT NOT NULL, channel TEXT NOT NULL, thread_ts TEXT,
    text TEXT NOT NULL, state TEXT NOT NULL DEFAULT 'pending', reply_ts TEXT, turn_id TEXT,
    attempts INTEGER NOT NULL DEFAULT 0, received REAL NOT NULL, finished REAL
);
CREATE INDEX inbox_thread ON inbox (thread, state, sent);
CREATE INDEX inbox_state ON inbox (state, received);
CREATE TABLE claims (thread TEXT PRIMARY KEY, owner TEXT NOT NULL, expires REAL NOT NULL);
CREATE TABLE joined (thread TEXT PRIMARY KEY, at REAL NOT NULL)
"""
POSTGRES_SCHEMA = SQLITE_SCHEMA.replace("seq INTEGER PRIMARY KEY", "seq BIGSERIAL PRIMARY KEY").replace(
    "REAL", "DOUBLE PRECISION"
)


@dataclass
class Pending:
    """One message waiting for its answer."""

    key: str
    team: str
    peer: str
    channel: str
    thread_ts: str | None
    text: str
    thread: str
    reply_ts: str | None = None  # the placeholder a (possibly dead) worker already posted for it
    attempts: int = 0


FIELDS = "key, team, peer, channel, thread_ts, text, thread, reply_ts, attempts"


def digest(key: str) -> str:
    """What the inbox keeps of a request key: its hash."""
    return hashlib.sha256(key.encode()).hexdigest()


def worker_id() -> str:
    """This process's name in claims: host, pid and a random part (a pid can be reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Inbox:
    """Pending messages, thread claims and the threads the agent is in, on the ledger's store."""

    def __init__(self, db: Database, claim_seconds: float, owner: str | None = None) -> None:
        self.db = db
        self.claim_seconds = claim_seconds
        self.owner = owner or worker_id()
        self._joined: set[str] = set()

    def receive(self, pending: Pending, ts: str, now: float | None = None) -> bool:
        """Record a delivery (`pending.key` is a `digest`); True if it still needs answering (new, or still pending)."""
        now = time.time() if now is None else now
        row = self.db.execute(
            "INSERT INTO inbox (key, thread, ts, sent, team, peer, channel, thread_ts, text, received) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING RETURNING seq",
            (
                pending.key,
                pending.thread,
                ts,
                _number(ts),
                pending.team,
                pending.peer,
                pending.channel,
                pending.thread_ts,
                pending.text,
                now,
            ),
        ).fetchone()
        if row is not None:
            return True
        state = self.db.execute("SELECT state FROM inbox WHERE key = ?", (pending.key,)).fetchone()
        return state is not None and state[0] == PENDING

    def claim(self, thread: str, now: float | None = None) -> bool:
        """Take the thread for this worker unless another holds an unexpired claim."""
        now = time.time() if now is None else now
        row = self.db.execute(
            "INSERT INTO claims (thread, owner, expires) VALUES (?, ?, ?) ON CONFLICT (thread) DO UPDATE "
            "SET owner = excluded.owner, expires = excluded.expires "
            "WHERE claims.expires < ? OR claims.owner = excluded.owner RETURNING owner",
            (thread, self.owner, now + self.claim_seconds, now),
        ).fetchone()
        return row is not None

    def renew(self, now: float | None = None) -> None:
        """Push back the expiry of every claim this worker holds."""
        now = time.time() if now is None else now
        self.db.execute("UPDATE claims SET expires = ? WHERE owner = ?", (now + self.claim_seconds, self.owner))

    def release(self, thread: str) -> None:
        """Give the thread up."""
        self.db.execute("DELETE FROM claims WHERE thread = ? AND owner = ?", (thread, self.owner))

    def next(self, thread: str) -> Pending | None:
        """The thread's oldest pending message, counted as started; one started too often is given up."""
        while True:
            row = self.db.execute(
                f"SELECT {FIELDS} FROM inbox WHERE thread = ? AND state = ? ORDER BY sent, seq LIMIT 1",
                (thread, PENDING),
            ).fetchone()
            if row is None:
                return None
            pending = Pending(*row)
            if pending.attempts < MAX_ATTEMPTS:
                self.db.execute("UPDATE inbox SET attempts = attempts + 1 WHERE key = ?", (pending.key,))
                return pending
            logger.error("slack: gave up a message in %s after %d attempts to answer it", thread, pending.attempts)
            self.finish(pending.key, None, state=FAILED)

    def placed(self, key: str, reply_ts: str) -> None:
        """Remember the placeholder posted for a message, so a worker taking over updates it."""
        self.db.execute("UPDATE inbox SET reply_ts = ? WHERE key = ?", (reply_ts, key))

    def finish(self, key: str, turn_id: str | None, *, state: str = DONE, now: float | None = None) -> None:
        """Mark a message answered (its text is cleared)."""
        now = time.time() if now is None else now
        self.db.execute(
            "UPDATE inbox SET state = ?, turn_id = ?, text = '', finished = ? WHERE key = ?",
            (state, turn_id, now, key),
        )

    def has_pending(self, thread: str) -> bool:
        """Whether the thread has a message waiting."""
        return (
            self.db.execute("SELECT 1 FROM inbox WHERE thread = ? AND state = ? LIMIT 1", (thread, PENDING)).fetchone()
            is not None
        )

    def orphans(self, now: float | None = None) -> list[str]:
        """Threads with pending messages that no live worker holds (its claim expired, or none)."""
        now = time.time() if now is None else now
        rows = self.db.execute(
            "SELECT DISTINCT inbox.thread FROM inbox LEFT JOIN claims ON claims.thread = inbox.thread "
            "WHERE inbox.state = ? AND (claims.thread IS NULL OR claims.expires < ?)",
            (PENDING, now),
        ).fetchall()
        return [row[0] for row in rows]

    def join(self, thread: str, now: float | None = None) -> None:
        """Remember that the agent is in a thread (it was mentioned there)."""
        now = time.time() if now is None else now
        self.db.execute("INSERT INTO joined VALUES (?, ?) ON CONFLICT (thread) DO NOTHING", (thread, now))
        self._joined.add(thread)

    def joined(self, thread: str) -> bool:
        """Whether the agent is in a thread (on any worker)."""
        if thread in self._joined:
            return True
        found = self.db.execute("SELECT 1 FROM joined WHERE thread = ?", (thread,)).fetchone() is not None
        if found:
            self._joined.add(thread)
        return found

    def prune(self, before: float) -> None:
        """Drop answered messages finished before `before`."""
        self.db.execute("DELETE FROM inbox WHERE state <> ? AND finished < ?", (PENDING, before))

    def forget(self, workspace: str, peer: str, thread: str | None = None) -> int:
        """Delete a peer's messages (or one thread's); returns how many."""
        where = "team = ? AND peer = ?" + (" AND thread = ?" if thread is not None else "")
        params: tuple[Any, ...] = (workspace, peer) + ((thread,) if thread is not None else ())
        return self.db.execute(f"DELETE FROM inbox WHERE {where}", params).rowcount


def _number(ts: str) -> float:
    """A Slack ts as a number, for ordering (0 if it is not one)."""
    try:
        return float(ts)
    except ValueError:
        return 0.0
