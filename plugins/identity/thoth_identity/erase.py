"""Forget's statements: delete the identity rows about a peer, or one thread's messages and what came from them."""

from __future__ import annotations

from typing import Any

from thoth_core.database import Database


def delete_peer(tx: Database, workspace: str, peer: str) -> dict[str, int]:
    """Delete every row about a peer (inside a transaction holding the peer's lock); returns counts."""
    key = (workspace, peer)
    receipt = {
        "facts": tx.execute("DELETE FROM facts WHERE workspace = ? AND peer = ?", key).rowcount,
        "observations": tx.execute("DELETE FROM observations WHERE workspace = ? AND peer = ?", key).rowcount,
        "messages": tx.execute("DELETE FROM messages WHERE workspace = ? AND peer = ?", key).rowcount,
        "cached_answers": tx.execute("DELETE FROM honcho_cache WHERE workspace = ? AND peer = ?", key).rowcount,
    }
    tx.execute("DELETE FROM honcho_sent WHERE workspace = ? AND peer = ?", key)
    tx.execute("DELETE FROM withheld WHERE workspace = ? AND peer = ?", key)
    tx.execute("DELETE FROM derive_pending WHERE workspace = ? AND peer = ?", key)
    tx.execute("DELETE FROM peers WHERE workspace = ? AND peer = ?", key)
    return receipt


def delete_thread(tx: Database, workspace: str, peer: str, thread: str) -> dict[str, int]:
    """Delete one thread's messages and what was derived from them (inside a transaction holding the peer's lock)."""
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
    delete_where("DELETE FROM derive_pending WHERE workspace = ? AND peer = ? AND message_id IN ({marks})", ids)
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
