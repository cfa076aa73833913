"""The Honcho outbox: each turn's messages wait in the identity database until Honcho accepts them.

Ingest puts a turn's two messages here first (one small transaction, so the turn is persisted
even when Honcho is down), then the writer thread sends the oldest rows in order. With
`[storage] url` the outbox is in the shared PostgreSQL, so any worker may drain it.
Rows leave the outbox in the same transaction that records their turn as sent, so a message
is never lost and, short of a kill between Honcho's answer and that commit, never sent twice.
Rows are claimed with a lease before sending, one claimer at a time (the store's lock), and a
(workspace, peer, thread) another worker is sending is left alone: several workers never send
the same rows, nor one thread's rows out of order; rows a killed worker had claimed go out
again once the lease has run out.
"""

from __future__ import annotations

import time
from typing import Any

from thoth_core.database import worker_id

from .store import IdentityStore

LEASE_SECONDS = 60.0  # a claim older than this belongs to a process that died
BATCH = 100  # Honcho takes at most 100 messages per call


class Outbox:
    """The `honcho_outbox` table of an identity store."""

    def __init__(self, store: IdentityStore) -> None:
        self.store = store
        self.token = worker_id()

    def put(self, workspace: str, peer: str, thread: str, messages: list[tuple[str, str, str, float]]) -> int:
        """Add (turn id, role, text, at) messages unless that turn was sent or queued already; returns how many."""
        turn_ids = sorted({m[0] for m in messages})
        already = self.store.sent(workspace, peer, turn_ids)
        rows = [(workspace, peer, thread, *m) for m in messages if m[0] not in already]
        added = 0
        with self.store.db.transaction() as tx:
            for row in rows:
                added += tx.execute(
                    "INSERT INTO honcho_outbox (workspace, peer, thread, turn_id, role, content, at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    row,
                ).rowcount
        return added

    def claim(self, limit: int = BATCH) -> list[dict[str, Any]]:
        """Claim the oldest rows of the oldest waiting (workspace, peer, thread) no other worker sends, in order."""
        now = time.time()
        expired = now - LEASE_SECONDS
        with self.store.db.transaction() as tx:
            if tx.dialect == "postgres":  # one claimer at a time (SQLite's write lock already is one)
                tx.execute("SELECT pg_advisory_xact_lock(hashtextextended('identity/outbox', 0))")
            first = tx.execute(
                "SELECT workspace, peer, thread FROM honcho_outbox o WHERE (claimed_by IS NULL OR claimed_at < ?)"
                " AND NOT EXISTS (SELECT 1 FROM honcho_outbox busy WHERE busy.workspace = o.workspace"
                " AND busy.peer = o.peer AND busy.thread = o.thread AND busy.claimed_by <> 'rejected'"
                " AND busy.claimed_at >= ?) ORDER BY id LIMIT 1",
                (expired, expired),
            ).fetchone()
            if first is None:
                return []
            rows = [
                dict(row)
                for row in tx.execute(
                    "SELECT * FROM honcho_outbox WHERE workspace = ? AND peer = ? AND thread = ?"
                    " AND (claimed_by IS NULL OR claimed_at < ?) ORDER BY id LIMIT ?",
                    (first[0], first[1], first[2], expired, limit),
                )
            ]
            for row in rows:
                tx.execute(
                    "UPDATE honcho_outbox SET claimed_by = ?, claimed_at = ?, attempts = attempts + 1 WHERE id = ?",
                    (self.token, now, row["id"]),
                )
        return rows

    def sent(self, rows: list[dict[str, Any]]) -> None:
        """Honcho accepted these rows: drop them and record their turns as sent, in one transaction."""
        with self.store.db.transaction() as tx:
            for row in rows:
                tx.execute("DELETE FROM honcho_outbox WHERE id = ?", (row["id"],))
                tx.execute(
                    "INSERT INTO honcho_sent (workspace, peer, thread, turn_id, at) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT DO NOTHING",
                    (row["workspace"], row["peer"], row["thread"], row["turn_id"], time.time()),
                )

    def release(self, rows: list[dict[str, Any]], error: str) -> None:
        """Sending failed: the rows wait for the next attempt, with the error noted."""
        self.store.db.executemany(
            "UPDATE honcho_outbox SET claimed_by = NULL, claimed_at = NULL, last_error = ? WHERE id = ?",
            [(error, row["id"]) for row in rows],
        )

    def park(self, rows: list[dict[str, Any]], error: str) -> None:
        """Honcho rejected these rows (400/422): keep them, out of the sending order, with the error."""
        self.store.db.executemany(
            "UPDATE honcho_outbox SET claimed_by = 'rejected', claimed_at = 1e18, last_error = ? WHERE id = ?",
            [(error, row["id"]) for row in rows],
        )

    def drop(self, workspace: str, peer: str, thread: str | None) -> int:
        """Erase a peer's waiting messages (or one thread's), for forget; returns how many."""
        sql, args = "DELETE FROM honcho_outbox WHERE workspace = ? AND peer = ?", [workspace, peer]
        if thread is not None:
            sql, args = sql + " AND thread = ?", [*args, thread]
        return int(self.store.db.execute(sql, args).rowcount)

    def rows(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """A peer's waiting messages, oldest first, for an export (not those Honcho refused for good)."""
        return self.store.rows(
            "SELECT thread, turn_id, role, content, at FROM honcho_outbox WHERE workspace = ? AND peer = ?"
            " AND (claimed_by IS NULL OR claimed_by <> 'rejected') ORDER BY id",
            workspace,
            peer,
        )

    def waiting(self, workspace: str | None = None, peer: str | None = None) -> int:
        """How many messages wait (for one peer, or all)."""
        if workspace is None:
            rows = self.store.rows("SELECT count(*) AS n FROM honcho_outbox")
        else:
            rows = self.store.rows(
                "SELECT count(*) AS n FROM honcho_outbox WHERE workspace = ? AND peer = ?", workspace, peer
            )
        return int(rows[0]["n"])

    def last_error(self, workspace: str, peer: str) -> str | None:
        """The error of the last failed attempt for a peer's waiting messages, if any."""
        rows = self.store.rows(
            "SELECT last_error FROM honcho_outbox WHERE workspace = ? AND peer = ? AND last_error IS NOT NULL"
            " ORDER BY id LIMIT 1",
            workspace,
            peer,
        )
        return rows[0]["last_error"] if rows else None
