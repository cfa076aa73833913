"""The turns waiting for the deriver: kept in the store (no text), claimed by one deriver at a time, per peer.

A turn's user message is queued when its post-turn write stores it, in any process; the deriver
claims a peer's waiting messages (oldest first), derives them and removes them. A claim names
its claimer (`host:pid:random`): one left by a process of this host that died mid-derivation is
taken again at once, any other after `CLAIM_TTL` seconds. A batch whose answer failed is
released for another try and dropped after `MAX_ATTEMPTS` (logged by the caller).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Collection
from typing import Any

from thoth_core.database import worker_id
from thoth_core.processes import pid_alive

from .store import IdentityStore

CLAIM_TTL = 300.0  # seconds a claim holds; past it another deriver may take the messages
MAX_ATTEMPTS = 2  # derivations that failed before a message is given up


def queue(store: IdentityStore, workspace: str, peer: str, message_id: int) -> None:
    """Queue a user message for derivation (once; queuing it again changes nothing)."""
    store.db.execute(
        "INSERT INTO derive_pending (message_id, workspace, peer, queued_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT DO NOTHING",
        (message_id, workspace, peer, time.time()),
    )


def waiting(store: IdentityStore, workspace: str, peer: str) -> tuple[int, float | None]:
    """How many of a peer's messages wait unclaimed (a deriver is on the others), and when the oldest was queued."""
    [row] = store.rows(
        "SELECT count(*) AS n, min(queued_at) AS oldest FROM derive_pending WHERE workspace = ? AND peer = ?"
        " AND (claimed_at IS NULL OR claimed_at < ?)",
        workspace,
        peer,
        time.time() - CLAIM_TTL,
    )
    return int(row["n"]), row["oldest"]


def waiting_peers(store: IdentityStore) -> list[tuple[str, str]]:
    """Every (workspace, peer) with messages waiting."""
    rows = store.rows("SELECT DISTINCT workspace, peer FROM derive_pending ORDER BY workspace, peer")
    return [(row["workspace"], row["peer"]) for row in rows]


def claim(
    store: IdentityStore, workspace: str, peer: str, *, limit: int, skip: Collection[int] = ()
) -> list[dict[str, Any]]:
    """Claim up to `limit` of a peer's waiting messages (not those in `skip`), oldest first: their id, text and
    the assistant's reply before each. Messages deleted meanwhile (forget) leave the queue here."""
    release_dead(store)
    token, now = worker_id(), time.time()
    free = "workspace = ? AND peer = ? AND (claimed_at IS NULL OR claimed_at < ?)"
    if skip:
        free += f" AND message_id NOT IN ({','.join('?' * len(skip))})"
    where = (workspace, peer, now - CLAIM_TTL, *skip)
    store.db.execute(
        f"UPDATE derive_pending SET claimed_by = ?, claimed_at = ? WHERE {free}"
        f" AND message_id IN (SELECT message_id FROM derive_pending WHERE {free} ORDER BY message_id LIMIT ?)",
        (token, now, *where, *where, limit),
    )
    claimed = store.rows(
        "SELECT p.message_id, p.attempts, m.id, m.thread, m.content FROM derive_pending p"
        " LEFT JOIN messages m ON m.id = p.message_id AND m.workspace = p.workspace AND m.peer = p.peer"
        " WHERE p.claimed_by = ? ORDER BY p.message_id",
        token,
    )
    gone = [row["message_id"] for row in claimed if row["id"] is None]
    if gone:
        done(store, gone)
    return [
        {
            "message_id": int(row["message_id"]),
            "attempts": int(row["attempts"]),
            "text": row["content"],
            "previous": previous_reply(store, workspace, peer, thread=row["thread"], before=int(row["message_id"])),
        }
        for row in claimed
        if row["id"] is not None
    ]


def release_dead(store: IdentityStore) -> None:
    """Give back the claims of claimers of this host that are gone (killed mid-derivation)."""
    host = socket.gethostname()
    for row in store.rows("SELECT DISTINCT claimed_by FROM derive_pending WHERE claimed_by IS NOT NULL"):
        claimer_host, _, rest = str(row["claimed_by"]).partition(":")
        pid = rest.partition(":")[0]
        if claimer_host == host and pid.isdigit() and not pid_alive(int(pid)):
            store.db.execute(
                "UPDATE derive_pending SET claimed_by = NULL, claimed_at = NULL WHERE claimed_by = ?",
                (row["claimed_by"],),
            )


def previous_reply(store: IdentityStore, workspace: str, peer: str, *, thread: str, before: int) -> str | None:
    """The assistant's last stored reply in a thread before a message, or None."""
    rows = store.rows(
        "SELECT content FROM messages WHERE workspace = ? AND peer = ? AND thread = ? AND role = 'assistant'"
        " AND id < ? ORDER BY id DESC LIMIT 1",
        workspace,
        peer,
        thread,
        before,
    )
    return str(rows[0]["content"]) if rows else None


def done(store: IdentityStore, message_ids: list[int]) -> None:
    """Remove messages from the queue (derived, or given up)."""
    store.db.executemany("DELETE FROM derive_pending WHERE message_id = ?", [(i,) for i in message_ids])


def failed(store: IdentityStore, message_ids: list[int]) -> list[int]:
    """Release messages whose derivation failed for another try; those tried `MAX_ATTEMPTS` times leave: returned."""
    store.db.executemany(
        "UPDATE derive_pending SET attempts = attempts + 1, claimed_by = NULL, claimed_at = NULL WHERE message_id = ?",
        [(i,) for i in message_ids],
    )
    if not message_ids:
        return []
    marks = ",".join("?" * len(message_ids))
    rows = store.rows(
        f"SELECT message_id FROM derive_pending WHERE message_id IN ({marks}) AND attempts >= ?",
        *message_ids,
        MAX_ATTEMPTS,
    )
    given_up = [int(row["message_id"]) for row in rows]
    done(store, given_up)
    return given_up
