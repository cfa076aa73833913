"""Export and import of the rows the identity store holds about one peer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .store import IdentityStore


def export_rows(store: IdentityStore, workspace: str, peer: str) -> dict[str, list[dict[str, Any]]]:
    """Every row held about a peer, by table."""
    key = (workspace, peer)
    return {
        "facts": store.fact_history(*key),
        "observations": store.rows(
            "SELECT id, content, kind, author, confidence, message_id, source, created_at FROM observations"
            " WHERE workspace = ? AND peer = ? ORDER BY id",
            *key,
        ),
        "messages": store.rows(
            "SELECT id, thread, session_id, turn_id, role, content, at FROM messages"
            " WHERE workspace = ? AND peer = ? ORDER BY id",
            *key,
        ),
        "honcho_cache": store.rows("SELECT kind, text, at FROM honcho_cache WHERE workspace = ? AND peer = ?", *key),
    }


def import_rows(
    store: IdentityStore, workspace: str, peer: str, rows: dict[str, list[dict[str, Any]]]
) -> dict[str, int]:
    """Add exported rows to a peer (skipping what is already held); returns counts added."""
    added = {"facts": 0, "observations": 0, "messages": 0}
    with store.db.transaction() as tx:  # a failure half-way leaves nothing behind
        store.lock_peer(tx, workspace, peer)
        message_ids: dict[int, int] = {}
        for m in rows.get("messages", []):
            exists = tx.execute(
                "SELECT id FROM messages WHERE workspace = ? AND peer = ? AND role = ? AND content = ? AND at = ?",
                (workspace, peer, m["role"], m["content"], m["at"]),
            ).fetchone()
            known = exists[0] if exists else None
            if known is None and m.get("turn_id"):  # the same turn's message, stored under another text
                known = store.turn_message(workspace, peer, m["turn_id"], m["role"])
            if known is not None:
                message_ids[m.get("id", -1)] = known
                continue
            message_ids[m.get("id", -1)] = store.add_message(
                workspace,
                peer,
                thread=m.get("thread", "imported"),
                session_id=m.get("session_id", "imported"),
                turn_id=m.get("turn_id"),
                role=m["role"],
                content=m["content"],
                at=m["at"],
            )
            added["messages"] += 1
        for o in rows.get("observations", []):
            new = store.add_observation(
                workspace,
                peer,
                o["content"],
                kind=o.get("kind", "explicit"),
                author=o.get("author", "imported"),
                confidence=o.get("confidence", 0.5),
                source=o.get("source", "import"),
                message_id=message_ids.get(o.get("message_id") or -1),
                at=o.get("created_at"),
            )
            added["observations"] += new is not None
        for f in rows.get("facts", []):  # the exported peer as subject (or none: an old export) is this peer
            subject = peer if f.get("subject") in (None, "", rows.get("peer")) else f["subject"]
            if tx.execute(
                "SELECT 1 FROM facts WHERE workspace = ? AND peer = ? AND subject = ? AND predicate = ?"
                " AND object = ? AND valid_from = ?",
                (workspace, peer, subject, f["predicate"], f["object"], f["valid_from"]),
            ).fetchone():
                continue
            tx.execute(
                "INSERT INTO facts"
                " (workspace, peer, subject, predicate, object, confidence, source, valid_from, valid_to)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    workspace,
                    peer,
                    subject,
                    f["predicate"],
                    f["object"],
                    f.get("confidence", 1.0),
                    f.get("source", "import"),
                    f["valid_from"],
                    f.get("valid_to"),
                ),
            )
            added["facts"] += 1
        store.ensure_peer(workspace, peer)
    return added
