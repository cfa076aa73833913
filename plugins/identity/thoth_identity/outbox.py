"""The Honcho outbox: each turn's messages wait in the identity database until Honcho accepts them.

Ingest puts a turn's two messages here first (one small transaction, so the turn is persisted
even when Honcho is down), then the writer thread sends the oldest rows in order. With
`[storage] url` the outbox is in the shared PostgreSQL, so any worker may drain it.
Rows leave the outbox in the same transaction that records their turn as sent, so a message
is never lost and, short of a kill between Honcho's answer and that commit, never sent twice.
Rows are claimed with a lease before sending, one claimer at a time (the store's lock), and a
(workspace, peer, thread) another worker is sending is left alone: several workers never send
the same rows, nor one thread's rows out of order.

A claim names its claimer (`host:pid:random`). Rows a dead process had claimed go out again at
once: with SQLite (one host) a claimer whose pid is gone is dead; with PostgreSQL each claimer
holds an advisory lock named after it while it lives, so a claimer whose lock can be taken is
dead, on any host. A clean exit gives its own claims back (`close`). The lease only bounds a
claim whose claimer cannot be checked (another host's, with SQLite) or that stays stuck.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any

from thoth_core.database import worker_id
from thoth_core.processes import pid_alive

from .store import CUT_SHORT_LIKE, IdentityStore

LEASE_SECONDS = 60.0  # a claim older than this is given up even if its claimer seems alive
BATCH = 100  # Honcho takes at most 100 messages per call
REJECTED = "rejected"  # the claimer of rows Honcho refused for good

logger = logging.getLogger(__name__)


class Outbox:
    """The `honcho_outbox` table of an identity store."""

    def __init__(self, store: IdentityStore) -> None:
        self.store = store
        self.token = worker_id()
        self._presence: Any = None  # PostgreSQL: the connection holding this claimer's lock while it lives

    def _lock_key(self, token: str) -> str:
        return f"thoth_identity:outbox-claimer:{token}"

    def _announce(self) -> None:
        """With PostgreSQL, hold this claimer's lock (on a connection of its own) before its first claim."""
        if self._presence is not None or self.store.db.dialect != "postgres":
            return
        conn = self.store.db.circuit.connect(autocommit=True)  # type: ignore[attr-defined]  # StoreDown at once
        try:
            conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (self._lock_key(self.token),))
        except BaseException:
            conn.close()
            raise
        self._presence = conn

    def alive(self, token: str) -> bool:
        """Whether the claimer named by a claim still runs (unknowable ones count as alive)."""
        if token == self.token:
            return True
        if self.store.db.dialect == "postgres":
            with self.store.db.transaction() as tx:  # a transaction-level try: released when it ends
                key = self._lock_key(token)
                return not tx.execute("SELECT pg_try_advisory_xact_lock(hashtextextended(?, 0))", (key,)).fetchone()[0]
        host, _, rest = token.partition(":")
        pid = rest.partition(":")[0]
        if host != socket.gethostname() or not pid.isdigit():
            return True  # another host's (or an old-style) claim: only its lease ends it
        return pid_alive(int(pid))

    def release_dead(self) -> int:
        """Give back the claims of claimers that died (their rows go out again at once); how many rows."""
        rows = self.store.rows(
            "SELECT DISTINCT claimed_by FROM honcho_outbox WHERE claimed_by IS NOT NULL AND claimed_by <> ?"
            " AND claimed_by <> ?",
            self.token,
            REJECTED,
        )
        released = 0
        for token in [row["claimed_by"] for row in rows]:
            if not self.alive(token):
                released += self.store.db.execute(
                    "UPDATE honcho_outbox SET claimed_by = NULL, claimed_at = NULL WHERE claimed_by = ?", (token,)
                ).rowcount
                logger.info("identity: outbox rows claimed by %s, which is gone, go out again", token)
        return released

    def put(self, workspace: str, peer: str, thread: str, messages: list[tuple[str, str, str, float]]) -> int:
        """Add (turn id, role, text, at) messages unless that turn was sent or queued already; returns how many.

        A queued reply kept cut short that no worker is sending yet is replaced by the turn's whole
        reply (counted); one Honcho already has stays as it is (Honcho edits no message's text).
        """
        turn_ids = sorted({m[0] for m in messages})
        already = self.store.sent(workspace, peer, turn_ids)
        rows = [(workspace, peer, thread, *m) for m in messages if m[0] not in already]
        added = 0
        with self.store.db.transaction() as tx:
            for row in rows:
                added += tx.execute(
                    "INSERT INTO honcho_outbox (workspace, peer, thread, turn_id, role, content, at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, peer, turn_id, role)"
                    " DO UPDATE SET content = excluded.content, at = excluded.at"
                    " WHERE honcho_outbox.claimed_by IS NULL AND honcho_outbox.content LIKE ?"
                    " AND excluded.content NOT LIKE ?",
                    (*row, *[CUT_SHORT_LIKE] * 2),
                ).rowcount
        return added

    def claim(self, limit: int = BATCH) -> list[dict[str, Any]]:
        """Claim the oldest rows of the oldest waiting (workspace, peer, thread) no other worker sends, in order."""
        self._announce()
        self.release_dead()
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
            f"UPDATE honcho_outbox SET claimed_by = '{REJECTED}', claimed_at = 1e18, last_error = ? WHERE id = ?",
            [(error, row["id"]) for row in rows],
        )

    def close(self) -> None:
        """A clean exit: give back this process's claims (others send those rows at once), then its lock."""
        try:
            self.store.db.execute(
                "UPDATE honcho_outbox SET claimed_by = NULL, claimed_at = NULL WHERE claimed_by = ?", (self.token,)
            )
        except self.store.db.errors as exc:
            logger.warning("identity: giving back the outbox claims of %s failed: %s", self.token, exc)
        finally:
            presence, self._presence = self._presence, None
            if presence is not None:
                try:  # at once, not when the server notices the connection closed
                    presence.execute(
                        "SELECT pg_advisory_unlock(hashtextextended(%s, 0))", (self._lock_key(self.token),)
                    )
                except self.store.db.errors as exc:
                    logger.warning("identity: releasing outbox claimer %s failed: %s", self.token, exc)
                finally:
                    presence.close()

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
