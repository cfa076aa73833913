"""The durable inbox: every message the agent should answer, kept in the ledger's store before Slack is acked.

Several workers (processes, hosts) can serve one Slack app on one shared store. Each delivery is
inserted once under its request key (`INSERT ... ON CONFLICT DO NOTHING`), so Slack's retries,
redeliveries and a second worker given the same event add nothing. A thread's pending messages
are answered in order (Slack ts, then arrival) by whichever worker holds the thread's *claim*: a
row with an owner and an expiry that the holder renews while it works. A worker killed mid-turn
stops renewing; once its claim expires any worker's sweep takes the thread over, and a message
whose placeholder was already posted gets that placeholder updated rather than a second reply.
Claim times are the database's clock, so hosts whose clocks disagree judge expiry alike; no
claim lapses within `claim_seconds` of the database's (re)start, as no holder could renew it while
it was down (a holder that lives renews it by then, and keeps its thread through a restart). A
holder re-takes its claim before each message and `next`, `placed` and `finish` act only while
it still owns the thread: a worker whose claim lapsed (a stalled loop, a store blip) and was
taken over stops there, and the new holder's answer is the one that counts.

A start that fails with a caught, retryable error (Slack or the network down, a store blip)
gives its attempt back and waits before the next try (doubling, up to `RETRY_MAX_SECONDS`);
`attempts` counts only starts that never ended cleanly (the worker died), up to `MAX_ATTEMPTS`.

The text is stored as the runtime's `[privacy]` redactor keeps it (the receiving worker answers
from the raw text it holds in memory; a worker that takes over answers from the stored text) and
is cleared once answered; answered rows keep only ids and ts, for `SEEN_KEEP_SECONDS`.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from thoth_core.database import Database, worker_id

logger = logging.getLogger(__name__)

MAX_ATTEMPTS = 3  # a message whose turn kept killing its worker is given up after this many starts
MAX_FAILURES = 20  # ... and one whose answer kept failing after this many tries (about a quarter of an hour)
RETRY_FIRST_SECONDS, RETRY_MAX_SECONDS = 1.0, 60.0  # the wait after a failed answer doubles from/up to these
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
SQLITE_RETRIES = """
ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN retry_at REAL NOT NULL DEFAULT 0
"""
POSTGRES_RETRIES = SQLITE_RETRIES.replace("REAL", "DOUBLE PRECISION")

CLOCKS = {  # the database's time in epoch seconds (SQLite's is the host's; 3.40 has no unixepoch('subsec'))
    "postgres": "CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS DOUBLE PRECISION)",
    "sqlite": "((julianday('now') - 2440587.5) * 86400.0)",
}
STARTED = {  # when the database (re)started, in epoch seconds: no claim lapses within claim_seconds of it
    "postgres": "CAST(EXTRACT(EPOCH FROM pg_postmaster_start_time()) AS DOUBLE PRECISION)",
    "sqlite": "0",
}
OWNED = "EXISTS (SELECT 1 FROM claims WHERE claims.thread = inbox.thread AND claims.owner = ?)"


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
    failures: int = 0


FIELDS = "key, team, peer, channel, thread_ts, text, thread, reply_ts, attempts, failures"


def digest(key: str) -> str:
    """What the inbox keeps of a request key: its hash."""
    return hashlib.sha256(key.encode()).hexdigest()


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

    def _clock(self, now: float | None) -> tuple[str, tuple[float, ...]]:
        """The SQL for "now" and its parameters: the database's clock, or `now` when one is given."""
        return ("?", (now,)) if now is not None else (CLOCKS[self.db.dialect], ())

    def claim(self, thread: str, now: float | None = None) -> bool:
        """Take (or keep) the thread for this worker unless another holds an unexpired claim."""
        at, clock = self._clock(now)
        lapsed, grace = self._lapsed("claims", now)
        row = self.db.execute(
            f"INSERT INTO claims (thread, owner, expires) VALUES (?, ?, {at} + ?) ON CONFLICT (thread) DO UPDATE "
            "SET owner = excluded.owner, expires = excluded.expires "
            f"WHERE {lapsed} OR claims.owner = excluded.owner RETURNING owner",
            (thread, self.owner, *clock, self.claim_seconds, *grace),
        ).fetchone()
        return row is not None

    def _lapsed(self, table: str, now: float | None) -> tuple[str, tuple[float, ...]]:
        """SQL (and its parameters) true when a claim of `table` has lapsed; the database's restart gives a grace."""
        at, clock = self._clock(now)
        if now is not None:  # a given clock (tests) has no restart to judge by
            return f"{table}.expires < {at}", clock
        return (
            f"({table}.expires < {at} AND {STARTED[self.db.dialect]} + ? < {at})",
            (*clock, self.claim_seconds, *clock),
        )

    def renew(self, now: float | None = None, *, threads: Collection[str] | None = None) -> None:
        """Push back the expiry of the claims this worker holds (of `threads` only, if given)."""
        if threads is not None and not threads:
            return
        at, clock = self._clock(now)
        among = "" if threads is None else f" AND thread IN ({', '.join('?' * len(threads))})"
        self.db.execute(
            f"UPDATE claims SET expires = {at} + ? WHERE owner = ?{among}",
            (*clock, self.claim_seconds, self.owner, *(threads or ())),
        )

    def release(self, thread: str) -> None:
        """Give the thread up."""
        self.db.execute("DELETE FROM claims WHERE thread = ? AND owner = ?", (thread, self.owner))

    def next(self, thread: str, now: float | None = None) -> Pending | None:
        """The thread's oldest pending message, counted as started; None if none is due or the thread is not ours.

        A message still waiting out a failed try holds back the ones after it (they stay in order);
        one started too often without finishing is given up.
        """
        at, clock = self._clock(now)
        while True:
            row = self.db.execute(
                f"SELECT {FIELDS}, CASE WHEN retry_at > {at} THEN 1 ELSE 0 END FROM inbox "
                "WHERE thread = ? AND state = ? ORDER BY sent, seq LIMIT 1",
                (*clock, thread, PENDING),
            ).fetchone()
            if row is None or row[-1]:
                return None
            pending = Pending(*row[:-1])
            if pending.attempts < MAX_ATTEMPTS:
                started = self.db.execute(
                    f"UPDATE inbox SET attempts = attempts + 1 WHERE key = ? AND state = ? AND {OWNED} RETURNING seq",
                    (pending.key, PENDING, self.owner),
                ).fetchone()
                return pending if started is not None else None
            logger.error("slack: gave up a message in %s after %d attempts to answer it", thread, pending.attempts)
            if not self.finish(pending.key, None, state=FAILED):
                return None

    def placed(self, key: str, reply_ts: str) -> bool:
        """Remember the placeholder posted for a message, so a worker taking over updates it; False if not ours."""
        return (
            self.db.execute(
                f"UPDATE inbox SET reply_ts = ? WHERE key = ? AND state = ? AND {OWNED}",
                (reply_ts, key, PENDING, self.owner),
            ).rowcount
            == 1
        )

    def retry_later(self, pending: Pending, *, counted: bool, now: float | None = None) -> None:
        """After a failed try: wait (doubling) before the next; give the attempt back unless `counted`."""
        at, clock = self._clock(now)
        wait = min(RETRY_MAX_SECONDS, RETRY_FIRST_SECONDS * 2**pending.failures)
        row = self.db.execute(
            f"UPDATE inbox SET attempts = attempts - ?, failures = failures + 1, retry_at = {at} + ? "
            f"WHERE key = ? AND state = ? AND {OWNED} RETURNING failures",
            (0 if counted else 1, *clock, wait, pending.key, PENDING, self.owner),
        ).fetchone()
        if row is not None and row[0] >= MAX_FAILURES:
            logger.error("slack: gave up a message in %s after %d failed tries to answer it", pending.thread, row[0])
            self.finish(pending.key, None, state=FAILED)

    def finish(self, key: str, turn_id: str | None, *, state: str = DONE, now: float | None = None) -> bool:
        """Mark a message answered (its text is cleared); False if it was not pending or the thread is not ours."""
        now = time.time() if now is None else now
        return (
            self.db.execute(
                "UPDATE inbox SET state = ?, turn_id = ?, text = '', finished = ? "
                f"WHERE key = ? AND state = ? AND {OWNED}",
                (state, turn_id, now, key, PENDING, self.owner),
            ).rowcount
            == 1
        )

    def ready(self, thread: str, now: float | None = None) -> bool:
        """Whether the thread has a message waiting that may be answered now (none is waiting out a failed try)."""
        at, clock = self._clock(now)
        return (
            self.db.execute(
                f"SELECT 1 FROM inbox WHERE thread = ? AND state = ? GROUP BY thread HAVING MAX(retry_at) <= {at}",
                (thread, PENDING, *clock),
            ).fetchone()
            is not None
        )

    def orphans(self, now: float | None = None) -> list[str]:
        """Threads with messages due that no live worker holds (its claim expired, or none)."""
        at, clock = self._clock(now)
        lapsed, grace = self._lapsed("claims", now)
        rows = self.db.execute(
            "SELECT inbox.thread FROM inbox LEFT JOIN claims ON claims.thread = inbox.thread "
            f"WHERE inbox.state = ? AND (claims.thread IS NULL OR {lapsed}) "
            f"GROUP BY inbox.thread HAVING MAX(inbox.retry_at) <= {at}",
            (PENDING, *grace, *clock),
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
