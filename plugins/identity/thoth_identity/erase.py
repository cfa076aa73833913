"""Forget: delete what the identity store holds about a peer, or one thread's messages and what came from them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core.database import Database

if TYPE_CHECKING:
    from .store import IdentityStore


def delete_rows(store: IdentityStore, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
    """Delete a peer's rows (or one thread's), in one transaction; returns counts (the caller scrubs)."""
    key = (workspace, peer)
    with store.db.transaction() as tx:
        store.lock_peer(tx, workspace, peer)
        if thread is not None:
            return _delete_thread(tx, workspace, peer, thread)
        receipt = {
            "facts": tx.execute("DELETE FROM facts WHERE workspace = ? AND peer = ?", key).rowcount,
            "observations": tx.execute("DELETE FROM observations WHERE workspace = ? AND peer = ?", key).rowcount,
            "messages": tx.execute("DELETE FROM messages WHERE workspace = ? AND peer = ?", key).rowcount,
            "cached_answers": tx.execute("DELETE FROM honcho_cache WHERE workspace = ? AND peer = ?", key).rowcount,
        }
        tx.execute("DELETE FROM honcho_sent WHERE workspace = ? AND peer = ?", key)
        tx.execute("DELETE FROM withheld WHERE workspace = ? AND peer = ?", key)
        tx.execute("DELETE FROM peers WHERE workspace = ? AND peer = ?", key)
        return receipt


def _delete_thread(tx: Database, workspace: str, peer: str, thread: str) -> dict[str, int]:
    """Delete one thread's messages and what was derived from them (inside a transaction)."""
    key = (workspace, peer)
    rows = tx.execute(
        "SELECT id, turn_id FROM messages WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread)
    ).fetchall()
    ids = [row["id"] for row in rows]
    sources = [f"derived:message:{i}" for i in ids] + [f"reaction:{r['turn_id']}" for r in rows if r["turn_id"]]

    def delete_where(sql: str, values: list[Any]) -> int:
        if not values:
            return 0
        marks = ",".join("?" * len(values))
        return int(tx.execute(sql.format(marks=marks), (*key, *values)).rowcount)

    facts = delete_where("DELETE FROM facts WHERE workspace = ? AND peer = ? AND source IN ({marks})", sources)
    delete_where("DELETE FROM withheld WHERE workspace = ? AND peer = ? AND message_id IN ({marks})", ids)
    observations = delete_where(
        "DELETE FROM observations WHERE workspace = ? AND peer = ? AND message_id IN ({marks})", ids
    ) + delete_where("DELETE FROM observations WHERE workspace = ? AND peer = ? AND source IN ({marks})", sources)
    messages = tx.execute(
        "DELETE FROM messages WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread)
    ).rowcount
    tx.execute("DELETE FROM honcho_sent WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread))
    # the cached representation and dialectic answers were drawn from every thread, this one too: fetched again
    cached = tx.execute("DELETE FROM honcho_cache WHERE workspace = ? AND peer = ?", key).rowcount
    return {"facts": facts, "observations": observations, "messages": messages, "cached_answers": cached}
