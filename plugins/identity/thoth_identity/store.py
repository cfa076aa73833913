"""The identity layer's tables: messages, observations, hard facts, Honcho cache, outbox, sent turns, withheld counts.

One SQLite file per Thoth home (`$THOTH_HOME/identity/identity.db`), or with `[storage] url`
the schema `thoth_identity` of the shared PostgreSQL, so every worker serving a workspace sees
the same facts at once (`thoth_core.database`). Every row carries its (workspace, peer).
Read-modify-write steps (a fact superseding another, a deduplicated observation) run in one
transaction holding the peer's lock, so workers writing about one peer at once do not race.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from thoth_core.config import Config
from thoth_core.database import Database, open_database
from thoth_core.types import CUT_SHORT

from .erase import delete_peer, delete_thread
from .migrations import MIGRATIONS, POSTGRES
from .search import OBSERVATION_COLUMNS, STOPWORDS, owner_token, query_terms, search_observations

__all__ = ["STOPWORDS", "IdentityStore", "owner_token", "query_terms"]

CUT_SHORT_LIKE = f"%{CUT_SHORT}"  # a LIKE pattern: the text of a reply kept cut short
TABLES = (
    "peers",
    "messages",
    "observations",
    "facts",
    "honcho_cache",
    "honcho_sent",
    "honcho_outbox",
    "withheld",
    "derive_pending",
)


class IdentityStore:
    """Thread-safe access to the identity tables (an SQLite file, or the shared PostgreSQL)."""

    def __init__(self, path: Path, config: Any = None) -> None:
        self.path = path
        self.db: Database = open_database(
            config if config is not None else Config(),
            "identity",
            path=path,
            migrations=MIGRATIONS,
            postgres=POSTGRES,
            rows=True,
        )
        self.where = self.db.where  # the file or schema, for messages

    def close(self) -> None:
        """Close the connection(s)."""
        self.db.close()

    def rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """The rows of a query, as dicts."""
        return [dict(row) for row in self.db.execute(sql, args)]

    def lock_peer(self, tx: Database, workspace: str, peer: str) -> None:
        """Inside a transaction: wait for other workers' transactions about this peer (SQLite's write lock does)."""
        if tx.dialect == "postgres":
            tx.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (f"identity/{workspace}/{peer}",))

    def held_peers(self) -> list[tuple[str, str]]:
        """Every (workspace, peer) the store holds anything about."""
        sql = (
            "SELECT workspace, peer FROM peers UNION SELECT workspace, peer FROM messages"
            " UNION SELECT workspace, peer FROM observations UNION SELECT workspace, peer FROM facts"
            " UNION SELECT workspace, peer FROM honcho_outbox ORDER BY workspace, peer"
        )
        return [(row["workspace"], row["peer"]) for row in self.db.execute(sql)]

    # --- peers and messages -------------------------------------------------------------

    def ensure_peer(self, workspace: str, peer: str) -> None:
        """Record that a peer exists."""
        self.db.execute(
            "INSERT INTO peers (workspace, peer, owner, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (workspace, peer, owner_token(workspace, peer), time.time()),
        )

    def add_message(
        self,
        workspace: str,
        peer: str,
        *,
        thread: str,
        session_id: str,
        turn_id: str | None,
        role: str,
        content: str,
        at: float | None = None,
    ) -> int:
        """Store one message of a peer's conversation; returns its id.

        A turn's message of a role is stored once: storing it again (a post-turn write replayed
        after a crash, or by another worker) returns the stored one's id. A reply kept cut short
        (ending with `CUT_SHORT`) is replaced in place by the whole one when the turn is run again
        with its id; a whole reply is never replaced.
        """
        with self.db.transaction() as tx:
            self.ensure_peer(workspace, peer)
            row = tx.execute(
                "INSERT INTO messages (workspace, peer, thread, session_id, turn_id, role, content, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (workspace, peer, turn_id, role)"
                " WHERE turn_id IS NOT NULL DO UPDATE SET content = excluded.content, at = excluded.at"
                " WHERE messages.content LIKE ? AND excluded.content NOT LIKE ? RETURNING id",
                (workspace, peer, thread, session_id, turn_id, role, content, at or time.time(), *[CUT_SHORT_LIKE] * 2),
            ).fetchone()
        if row is not None:
            return int(row[0])
        return self.turn_message(workspace, peer, str(turn_id), role) or 0

    def turn_message(self, workspace: str, peer: str, turn_id: str, role: str) -> int | None:
        """The id of a turn's stored message of this role (`user` or `assistant`), or None."""
        rows = self.rows(
            "SELECT id FROM messages WHERE workspace = ? AND peer = ? AND turn_id = ? AND role = ?",
            workspace,
            peer,
            turn_id,
            role,
        )
        return int(rows[0]["id"]) if rows else None

    def mark_derived(self, message_id: int) -> None:
        """Record that the deriver finished with this message (whatever it found)."""
        self.db.execute("UPDATE messages SET derived_at = ? WHERE id = ?", (time.time(), message_id))

    def derived_from(self, workspace: str, peer: str, message_id: int) -> bool:
        """Whether the deriver finished with this message, or observations, facts or withheld items come from it."""
        return bool(
            self.rows(
                "SELECT 1 FROM messages WHERE id = ? AND derived_at IS NOT NULL"
                " UNION ALL SELECT 1 FROM observations WHERE workspace = ? AND peer = ? AND message_id = ?"
                " UNION ALL SELECT 1 FROM facts WHERE workspace = ? AND peer = ? AND source = ?"
                " UNION ALL SELECT 1 FROM withheld WHERE workspace = ? AND peer = ? AND message_id = ? LIMIT 1",
                message_id,
                workspace,
                peer,
                message_id,
                workspace,
                peer,
                f"derived:message:{message_id}",
                workspace,
                peer,
                message_id,
            )
        )

    def derived_from_messages(
        self, workspace: str, peer: str, message_ids: Iterable[int]
    ) -> tuple[dict[int, str], list[dict[str, Any]], list[dict[str, Any]]]:
        """The texts of these messages of a peer, and the observations and facts the deriver drew from them."""
        ids = sorted(set(message_ids))
        if not ids:
            return {}, [], []
        marks = ",".join("?" * len(ids))
        texts = {
            int(row["id"]): row["content"]
            for row in self.rows(
                f"SELECT id, content FROM messages WHERE workspace = ? AND peer = ? AND id IN ({marks})",
                workspace,
                peer,
                *ids,
            )
        }
        observations = self.rows(
            f"SELECT {OBSERVATION_COLUMNS} FROM observations WHERE workspace = ? AND peer = ? AND author = 'deriver'"
            f" AND message_id IN ({marks})",
            workspace,
            peer,
            *ids,
        )
        facts = self.rows(
            f"SELECT * FROM facts WHERE workspace = ? AND peer = ? AND source IN ({marks})",
            workspace,
            peer,
            *[f"derived:message:{i}" for i in ids],
        )
        return texts, observations, facts

    def add_withheld(self, workspace: str, peer: str, message_id: int | None, counts: dict[str, int]) -> None:
        """Count derived items of a message the write policy withheld, by reason (their text is not kept)."""
        self.db.executemany(
            "INSERT INTO withheld (workspace, peer, message_id, reason, items, at) VALUES (?, ?, ?, ?, ?, ?)",
            [(workspace, peer, message_id, reason, items, time.time()) for reason, items in counts.items() if items],
        )

    # --- turns sent to Honcho -------------------------------------------------------------

    def mark_sent(self, workspace: str, peer: str, thread: str, turn_ids: list[str]) -> None:
        """Remember that these turns' messages reached Honcho."""
        self.db.executemany(
            "INSERT INTO honcho_sent (workspace, peer, thread, turn_id, at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT DO NOTHING",
            [(workspace, peer, thread, turn_id, time.time()) for turn_id in turn_ids],
        )

    def sent(self, workspace: str, peer: str, turn_ids: list[str]) -> set[str]:
        """Which of these turns' messages already reached Honcho."""
        if not turn_ids:
            return set()
        marks = ",".join("?" * len(turn_ids))
        rows = self.rows(
            f"SELECT turn_id FROM honcho_sent WHERE workspace = ? AND peer = ? AND turn_id IN ({marks})",
            workspace,
            peer,
            *turn_ids,
        )
        return {row["turn_id"] for row in rows}

    # --- observations -------------------------------------------------------------------

    def add_observation(
        self,
        workspace: str,
        peer: str,
        content: str,
        *,
        kind: str,
        author: str,
        confidence: float,
        source: str,
        message_id: int | None = None,
        at: float | None = None,
    ) -> int | None:
        """Store an observation about a peer; returns its id, or None if the same text is already held."""
        content = content.strip()
        if not content:
            return None
        with self.db.transaction() as tx:
            self.lock_peer(tx, workspace, peer)
            if tx.execute(
                "SELECT 1 FROM observations WHERE workspace = ? AND peer = ? AND content = ?",
                (workspace, peer, content),
            ).fetchone():
                return None
            self.ensure_peer(workspace, peer)
            row = tx.execute(
                "INSERT INTO observations"
                " (workspace, peer, owner, content, kind, author, confidence, message_id, source, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                (
                    workspace,
                    peer,
                    owner_token(workspace, peer),
                    content,
                    kind,
                    author,
                    max(0.0, min(1.0, float(confidence))),
                    message_id,
                    source,
                    at or time.time(),
                ),
            ).fetchone()
            return int(row[0])

    def search_observations(self, workspace: str, peer: str, text: str, *, limit: int) -> list[dict[str, Any]]:
        """The peer's observations most relevant to a message (full-text rank, weighted by confidence)."""
        return search_observations(self.db, workspace, peer, text, limit=limit)

    def recent_observations(self, workspace: str, peer: str, *, limit: int) -> list[dict[str, Any]]:
        """The peer's most recent observations."""
        return self.rows(
            f"SELECT {OBSERVATION_COLUMNS} FROM observations WHERE workspace = ? AND peer = ?"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            workspace,
            peer,
            limit,
        )

    def observation(self, workspace: str, peer: str, observation_id: int) -> dict[str, Any] | None:
        """One of the peer's observations by id, or None (another peer's too)."""
        rows = self.rows(
            f"SELECT {OBSERVATION_COLUMNS} FROM observations WHERE id = ? AND workspace = ? AND peer = ?",
            observation_id,
            workspace,
            peer,
        )
        return rows[0] if rows else None

    def observation_id(self, workspace: str, peer: str, content: str) -> int | None:
        """The id of the peer's observation holding exactly this text, or None."""
        rows = self.rows(
            "SELECT id FROM observations WHERE workspace = ? AND peer = ? AND content = ?", workspace, peer, content
        )
        return int(rows[0]["id"]) if rows else None

    def observations_before(
        self, workspace: str, peer: str, *, before: float | None, limit: int, explicit: bool | None = None
    ) -> list[dict[str, Any]]:
        """The peer's observations newest first, older than `before` (None: all); `explicit`: only notes, or none."""
        where = "" if explicit is None else " AND kind = 'explicit'" if explicit else " AND kind <> 'explicit'"
        older = () if before is None else (before,)
        where += " AND created_at < ?" if older else ""
        return self.rows(
            f"SELECT {OBSERVATION_COLUMNS} FROM observations WHERE workspace = ? AND peer = ?{where}"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            workspace,
            peer,
            *older,
            limit,
        )

    def delete_observation(self, workspace: str, peer: str, observation_id: int) -> bool:
        """Delete one of the peer's observations (a correction); whether there was one."""
        return bool(
            self.db.execute(
                "DELETE FROM observations WHERE id = ? AND workspace = ? AND peer = ?",
                (observation_id, workspace, peer),
            ).rowcount
        )

    # --- hard facts ---------------------------------------------------------------------

    def set_fact(
        self,
        workspace: str,
        peer: str,
        predicate: str,
        value: str,
        *,
        confidence: float,
        source: str,
        multi_valued: bool = False,
        subject: str | None = None,
        at: float | None = None,
        replaces: int | None = None,
    ) -> dict[str, Any]:
        """Assert a fact; a new value of a single-valued predicate closes the old one's validity.

        `replaces` (a correction) closes that one current fact only, whatever the predicate.
        Returns `{"fact": row, "superseded": [rows], "unchanged": bool}`.
        """
        at = at or time.time()
        subject = subject or peer
        with self.db.transaction() as tx:
            self.lock_peer(tx, workspace, peer)
            current = self.rows(
                "SELECT * FROM facts WHERE workspace = ? AND peer = ? AND subject = ? AND predicate = ?"
                " AND valid_to IS NULL ORDER BY id",
                workspace,
                peer,
                subject,
                predicate,
            )
            same = [f for f in current if f["object"].casefold() == value.casefold()]
            if replaces is not None:
                superseded = [f for f in current if f["id"] == replaces and f not in same]
            else:
                superseded = [] if multi_valued or same else current
            for old in superseded:
                tx.execute("UPDATE facts SET valid_to = ? WHERE id = ?", (at, old["id"]))
                old["valid_to"] = at
            if same:
                return {"fact": same[0], "superseded": superseded, "unchanged": not superseded}
            fact = tx.execute(
                "INSERT INTO facts"
                " (workspace, peer, subject, predicate, object, confidence, source, valid_from, valid_to)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL) RETURNING *",
                (workspace, peer, subject, predicate, value, confidence, source, at),
            ).fetchone()
            self.ensure_peer(workspace, peer)
        return {"fact": dict(fact), "superseded": superseded, "unchanged": False}

    def current_fact(self, workspace: str, peer: str, fact_id: int) -> dict[str, Any] | None:
        """One of the peer's current facts by id, or None."""
        rows = self.rows(
            "SELECT * FROM facts WHERE id = ? AND workspace = ? AND peer = ? AND valid_to IS NULL",
            fact_id,
            workspace,
            peer,
        )
        return rows[0] if rows else None

    def delete_fact(self, workspace: str, peer: str, fact_id: int) -> bool:
        """Delete one of the peer's facts (a correction); whether there was one."""
        return bool(
            self.db.execute(
                "DELETE FROM facts WHERE id = ? AND workspace = ? AND peer = ?", (fact_id, workspace, peer)
            ).rowcount
        )

    def current_facts(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """Facts about a peer that hold now."""
        return self.rows(
            "SELECT * FROM facts WHERE workspace = ? AND peer = ? AND valid_to IS NULL"
            " ORDER BY predicate, valid_from, id",
            workspace,
            peer,
        )

    def fact_history(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """Every fact ever held about a peer, superseded ones included."""
        return self.rows(
            "SELECT * FROM facts WHERE workspace = ? AND peer = ? ORDER BY predicate, valid_from, id", workspace, peer
        )

    # --- Honcho fallback cache ----------------------------------------------------------

    def cache_put(self, workspace: str, peer: str, kind: str, text: str) -> None:
        """Keep the last good Honcho answer (`dialectic`) or representation for fallbacks."""
        self.db.execute(
            "INSERT INTO honcho_cache (workspace, peer, kind, text, at) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (workspace, peer, kind) DO UPDATE SET text = excluded.text, at = excluded.at",
            (workspace, peer, kind, text, time.time()),
        )

    def cache_get(self, workspace: str, peer: str, kind: str) -> dict[str, Any] | None:
        """A cached Honcho answer, with its time, or None."""
        rows = self.rows(
            "SELECT text, at FROM honcho_cache WHERE workspace = ? AND peer = ? AND kind = ?", workspace, peer, kind
        )
        return rows[0] if rows else None

    # --- counts, export, import, forget -------------------------------------------------

    def counts(self, workspace: str, peer: str) -> dict[str, int]:
        """How many observations, current facts and messages are held about a peer, and derived items withheld."""

        def one(sql: str) -> int:
            return int(self.db.execute(sql, (workspace, peer)).fetchone()[0])

        return {
            "observations": one("SELECT count(*) FROM observations WHERE workspace = ? AND peer = ?"),
            "facts": one("SELECT count(*) FROM facts WHERE workspace = ? AND peer = ? AND valid_to IS NULL"),
            "fact_history": one("SELECT count(*) FROM facts WHERE workspace = ? AND peer = ?"),
            "messages": one("SELECT count(*) FROM messages WHERE workspace = ? AND peer = ?"),
            "withheld": one("SELECT coalesce(sum(items), 0) FROM withheld WHERE workspace = ? AND peer = ?"),
        }

    def export_rows(self, workspace: str, peer: str) -> dict[str, list[dict[str, Any]]]:
        """Every row held about a peer, by table."""
        key = (workspace, peer)
        return {
            "facts": self.fact_history(*key),
            "observations": self.rows(
                "SELECT id, content, kind, author, confidence, message_id, source, created_at FROM observations"
                " WHERE workspace = ? AND peer = ? ORDER BY id",
                *key,
            ),
            "messages": self.rows(
                "SELECT id, thread, session_id, turn_id, role, content, at FROM messages"
                " WHERE workspace = ? AND peer = ? ORDER BY id",
                *key,
            ),
            "honcho_cache": self.rows("SELECT kind, text, at FROM honcho_cache WHERE workspace = ? AND peer = ?", *key),
        }

    def import_rows(self, workspace: str, peer: str, rows: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """Add exported rows to a peer (skipping what is already held), all or nothing; returns counts added."""
        added = {"facts": 0, "observations": 0, "messages": 0}
        with self.db.transaction() as tx:  # a failure half-way leaves nothing behind
            self.lock_peer(tx, workspace, peer)
            message_ids: dict[int, int] = {}
            for m in rows.get("messages", []):
                exists = tx.execute(
                    "SELECT id FROM messages WHERE workspace = ? AND peer = ? AND role = ? AND content = ? AND at = ?",
                    (workspace, peer, m["role"], m["content"], m["at"]),
                ).fetchone()
                known = exists[0] if exists else None
                if known is None and m.get("turn_id"):  # the same turn's message, stored under another text
                    known = self.turn_message(workspace, peer, m["turn_id"], m["role"])
                if known is not None:
                    message_ids[m.get("id", -1)] = known
                    continue
                message_ids[m.get("id", -1)] = self.add_message(
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
                new = self.add_observation(
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
            self.ensure_peer(workspace, peer)
        return added

    def delete(self, workspace: str, peer: str, thread: str | None = None) -> dict[str, int]:
        """Delete what is held about a peer (or only one thread of theirs), erased from the store; returns counts."""
        with self.db.transaction() as tx:
            self.lock_peer(tx, workspace, peer)
            receipt = delete_peer(tx, workspace, peer) if thread is None else delete_thread(tx, workspace, peer, thread)
        return {**receipt, **self.scrub()}

    def scrub(self) -> dict[str, int]:
        """Erase what deletes left behind (FTS5 segments and WAL; PostgreSQL's dead rows); a receipt addition."""
        return self.db.scrub(tables=TABLES, fts=["observations_fts"])
