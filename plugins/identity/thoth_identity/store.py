"""The identity layer's SQLite file: messages, observations (FTS5), hard facts, Honcho cache and sent turns.

One file per Thoth home (`$THOTH_HOME/identity/identity.db`). Every row carries its
(workspace, peer); observations also carry an `owner` token indexed by FTS5, so a search is
an intersection inside the index and one peer's rows can never match another peer's query.
Hook impls run in worker threads: one connection, `check_same_thread=False`, one lock.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from thoth_core.storage import connect, migrate, scrub

from .migrations import MIGRATIONS

_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
STOPWORDS = frozenset(
    "the and for are but not you your yours with this that what when where which who whom why how was were "
    "have has had can could would should will shall may might must our ours they them their there here from "
    "into onto about over under than then its it's just also very much many some any all each more most "
    "please tell know want need like does did doing done been being get got let make made say said".split()
)


def owner_token(workspace: str, peer: str) -> str:
    """The FTS5 token that marks one peer's observations."""
    return "o" + hashlib.sha1(f"{workspace}\x00{peer}".encode()).hexdigest()[:20]


def query_terms(text: str, limit: int = 16) -> list[str]:
    """Distinct content words of a message, for a full-text OR query."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:limit]


class IdentityStore:
    """Thread-safe access to the identity database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self.db = connect(path, rows=True)
        migrate(self.db, MIGRATIONS)

    def close(self) -> None:
        """Close the connection."""
        with self.lock:
            self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """Hold the lock and run the block as one transaction."""
        with self.lock:
            self.db.execute("BEGIN")
            try:
                yield self.db
            except BaseException:
                self.db.execute("ROLLBACK")
                raise
            self.db.execute("COMMIT")

    def _rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self.lock:
            return [dict(row) for row in self.db.execute(sql, args)]

    def _write(self, sql: str, *args: Any) -> int:
        with self.lock:
            cursor = self.db.execute(sql, args)
            return int(cursor.lastrowid or 0) if sql.lstrip().upper().startswith("INSERT") else cursor.rowcount

    # --- peers and messages -------------------------------------------------------------

    def ensure_peer(self, workspace: str, peer: str) -> None:
        """Record that a peer exists."""
        self._write(
            "INSERT OR IGNORE INTO peers (workspace, peer, owner, created_at) VALUES (?, ?, ?, ?)",
            workspace,
            peer,
            owner_token(workspace, peer),
            time.time(),
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
        after a crash) returns the stored one's id.
        """
        with self.lock:
            self.ensure_peer(workspace, peer)
            cursor = self.db.execute(
                "INSERT INTO messages (workspace, peer, thread, session_id, turn_id, role, content, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (workspace, peer, thread, session_id, turn_id, role, content, at or time.time()),
            )
            if cursor.rowcount:
                return int(cursor.lastrowid or 0)
            return self.turn_message(workspace, peer, str(turn_id), role) or 0

    def turn_message(self, workspace: str, peer: str, turn_id: str, role: str) -> int | None:
        """The id of a turn's stored message of this role (`user` or `assistant`), or None."""
        rows = self._rows(
            "SELECT id FROM messages WHERE workspace = ? AND peer = ? AND turn_id = ? AND role = ?",
            workspace,
            peer,
            turn_id,
            role,
        )
        return int(rows[0]["id"]) if rows else None

    def mark_derived(self, message_id: int) -> None:
        """Record that the deriver finished with this message (whatever it found)."""
        self._write("UPDATE messages SET derived_at = ? WHERE id = ?", time.time(), message_id)

    def derived_from(self, workspace: str, peer: str, message_id: int) -> bool:
        """Whether the deriver finished with this message, or observations or facts come from it."""
        return bool(
            self._rows(
                "SELECT 1 FROM messages WHERE id = ? AND derived_at IS NOT NULL"
                " UNION ALL SELECT 1 FROM observations WHERE workspace = ? AND peer = ? AND message_id = ?"
                " UNION ALL SELECT 1 FROM facts WHERE workspace = ? AND peer = ? AND source = ? LIMIT 1",
                message_id,
                workspace,
                peer,
                message_id,
                workspace,
                peer,
                f"derived:message:{message_id}",
            )
        )

    # --- turns sent to Honcho -------------------------------------------------------------

    def mark_sent(self, workspace: str, peer: str, thread: str, turn_ids: list[str]) -> None:
        """Remember that these turns' messages reached Honcho."""
        with self.lock:
            self.db.executemany(
                "INSERT OR IGNORE INTO honcho_sent (workspace, peer, thread, turn_id, at) VALUES (?, ?, ?, ?, ?)",
                [(workspace, peer, thread, turn_id, time.time()) for turn_id in turn_ids],
            )

    def sent(self, workspace: str, peer: str, turn_ids: list[str]) -> set[str]:
        """Which of these turns' messages already reached Honcho."""
        if not turn_ids:
            return set()
        marks = ",".join("?" * len(turn_ids))
        rows = self._rows(
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
        with self.lock:
            if self.db.execute(
                "SELECT 1 FROM observations WHERE workspace = ? AND peer = ? AND content = ?",
                (workspace, peer, content),
            ).fetchone():
                return None
            self.ensure_peer(workspace, peer)
            return self._write(
                "INSERT INTO observations"
                " (workspace, peer, owner, content, kind, author, confidence, message_id, source, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
            )

    def search_observations(self, workspace: str, peer: str, text: str, *, limit: int) -> list[dict[str, Any]]:
        """The peer's observations most relevant to a message (BM25, weighted by confidence)."""
        terms = query_terms(text)
        if not terms:
            return []
        match = f'owner : "{owner_token(workspace, peer)}" AND content : (' + " OR ".join(f'"{t}"' for t in terms) + ")"
        with self.lock:  # rank inside the index first, then read only the winners' rows
            ranked = dict(
                self.db.execute(
                    "SELECT rowid, bm25(observations_fts, 0.0, 1.0) AS score FROM observations_fts"
                    " WHERE observations_fts MATCH ? ORDER BY score LIMIT ?",
                    (match, limit * 3),
                ).fetchall()
            )
            marks = ",".join("?" * len(ranked))
            rows = [
                dict(row)
                for row in self.db.execute(
                    f"SELECT * FROM observations WHERE id IN ({marks}) AND workspace = ? AND peer = ?",
                    (*ranked, workspace, peer),
                )
            ]
        for row in rows:
            row["rank"] = ranked[row["id"]]
        rows.sort(key=lambda r: r["rank"] * (0.5 + r["confidence"] / 2))
        return rows[:limit]

    def recent_observations(self, workspace: str, peer: str, *, limit: int) -> list[dict[str, Any]]:
        """The peer's most recent observations."""
        return self._rows(
            "SELECT * FROM observations WHERE workspace = ? AND peer = ? ORDER BY created_at DESC, id DESC LIMIT ?",
            workspace,
            peer,
            limit,
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
    ) -> dict[str, Any]:
        """Assert a fact; a new value of a single-valued predicate closes the old one's validity.

        Returns `{"fact": row, "superseded": [rows], "unchanged": bool}`.
        """
        at = at or time.time()
        subject = subject or peer
        with self.lock:
            current = self._rows(
                "SELECT * FROM facts WHERE workspace = ? AND peer = ? AND subject = ? AND predicate = ?"
                " AND valid_to IS NULL",
                workspace,
                peer,
                subject,
                predicate,
            )
            same = [f for f in current if f["object"].casefold() == value.casefold()]
            if same:
                return {"fact": same[0], "superseded": [], "unchanged": True}
            superseded = [] if multi_valued else current
            with self.transaction():
                for old in superseded:
                    self.db.execute("UPDATE facts SET valid_to = ? WHERE id = ?", (at, old["id"]))
                    old["valid_to"] = at
                fact_id = self._write(
                    "INSERT INTO facts"
                    " (workspace, peer, subject, predicate, object, confidence, source, valid_from, valid_to)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL)",
                    workspace,
                    peer,
                    subject,
                    predicate,
                    value,
                    confidence,
                    source,
                    at,
                )
            self.ensure_peer(workspace, peer)
            fact = self._rows("SELECT * FROM facts WHERE id = ?", fact_id)[0]
            return {"fact": fact, "superseded": superseded, "unchanged": False}

    def current_facts(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """Facts about a peer that hold now."""
        return self._rows(
            "SELECT * FROM facts WHERE workspace = ? AND peer = ? AND valid_to IS NULL ORDER BY predicate, valid_from",
            workspace,
            peer,
        )

    def fact_history(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """Every fact ever held about a peer, superseded ones included."""
        return self._rows(
            "SELECT * FROM facts WHERE workspace = ? AND peer = ? ORDER BY predicate, valid_from, id", workspace, peer
        )

    # --- Honcho fallback cache ----------------------------------------------------------

    def cache_put(self, workspace: str, peer: str, kind: str, text: str) -> None:
        """Keep the last good Honcho answer (`dialectic`) or representation for fallbacks."""
        self._write(
            "INSERT OR REPLACE INTO honcho_cache (workspace, peer, kind, text, at) VALUES (?, ?, ?, ?, ?)",
            workspace,
            peer,
            kind,
            text,
            time.time(),
        )

    def cache_get(self, workspace: str, peer: str, kind: str) -> dict[str, Any] | None:
        """A cached Honcho answer, with its time, or None."""
        rows = self._rows(
            "SELECT text, at FROM honcho_cache WHERE workspace = ? AND peer = ? AND kind = ?", workspace, peer, kind
        )
        return rows[0] if rows else None

    # --- counts, export, import, forget -------------------------------------------------

    def counts(self, workspace: str, peer: str) -> dict[str, int]:
        """How many observations, current facts and messages are held about a peer."""
        with self.lock:

            def one(sql: str) -> int:
                return int(self.db.execute(sql, (workspace, peer)).fetchone()[0])

            return {
                "observations": one("SELECT count(*) FROM observations WHERE workspace = ? AND peer = ?"),
                "facts": one("SELECT count(*) FROM facts WHERE workspace = ? AND peer = ? AND valid_to IS NULL"),
                "fact_history": one("SELECT count(*) FROM facts WHERE workspace = ? AND peer = ?"),
                "messages": one("SELECT count(*) FROM messages WHERE workspace = ? AND peer = ?"),
            }

    def export_rows(self, workspace: str, peer: str) -> dict[str, list[dict[str, Any]]]:
        """Every row held about a peer, by table."""
        key = (workspace, peer)
        return {
            "facts": self.fact_history(*key),
            "observations": self._rows(
                "SELECT id, content, kind, author, confidence, message_id, source, created_at FROM observations"
                " WHERE workspace = ? AND peer = ? ORDER BY id",
                *key,
            ),
            "messages": self._rows(
                "SELECT id, thread, session_id, turn_id, role, content, at FROM messages"
                " WHERE workspace = ? AND peer = ? ORDER BY id",
                *key,
            ),
            "honcho_cache": self._rows(
                "SELECT kind, text, at FROM honcho_cache WHERE workspace = ? AND peer = ?", *key
            ),
        }

    def import_rows(self, workspace: str, peer: str, rows: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
        """Add exported rows to a peer (skipping what is already held); returns counts added."""
        added = {"facts": 0, "observations": 0, "messages": 0}
        with self.transaction():  # a failure half-way leaves nothing behind
            message_ids: dict[int, int] = {}
            for m in rows.get("messages", []):
                exists = self.db.execute(
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
                if self.db.execute(
                    "SELECT 1 FROM facts WHERE workspace = ? AND peer = ? AND subject = ? AND predicate = ?"
                    " AND object = ? AND valid_from = ?",
                    (workspace, peer, subject, f["predicate"], f["object"], f["valid_from"]),
                ).fetchone():
                    continue
                self._write(
                    "INSERT INTO facts"
                    " (workspace, peer, subject, predicate, object, confidence, source, valid_from, valid_to)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    workspace,
                    peer,
                    subject,
                    f["predicate"],
                    f["object"],
                    f.get("confidence", 1.0),
                    f.get("source", "import"),
                    f["valid_from"],
                    f.get("valid_to"),
                )
                added["facts"] += 1
            self.ensure_peer(workspace, peer)
        return added

    def delete(self, workspace: str, peer: str, thread: str | None = None) -> dict[str, int]:
        """Delete what is held about a peer (or only one thread of theirs), erasing it from the file; returns counts."""
        with self.lock:
            receipt = self._delete(workspace, peer, thread)
            return {**receipt, **scrub(self.db, fts=["observations_fts"])}

    def _delete(self, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
        key = (workspace, peer)
        with self.transaction():
            if thread is not None:
                return self._delete_thread(workspace, peer, thread)
            receipt = {
                "facts": self.db.execute("DELETE FROM facts WHERE workspace = ? AND peer = ?", key).rowcount,
                "observations": self.db.execute(
                    "DELETE FROM observations WHERE workspace = ? AND peer = ?", key
                ).rowcount,
                "messages": self.db.execute("DELETE FROM messages WHERE workspace = ? AND peer = ?", key).rowcount,
                "cached_answers": self.db.execute(
                    "DELETE FROM honcho_cache WHERE workspace = ? AND peer = ?", key
                ).rowcount,
            }
            self.db.execute("DELETE FROM honcho_sent WHERE workspace = ? AND peer = ?", key)
            self.db.execute("DELETE FROM peers WHERE workspace = ? AND peer = ?", key)
            return receipt

    def _delete_thread(self, workspace: str, peer: str, thread: str) -> dict[str, int]:
        """Delete one thread's messages and what was derived from them (inside a transaction)."""
        key = (workspace, peer)
        rows = self.db.execute(
            "SELECT id, turn_id FROM messages WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread)
        ).fetchall()
        ids = [row["id"] for row in rows]
        sources = [f"derived:message:{i}" for i in ids] + [f"reaction:{r['turn_id']}" for r in rows if r["turn_id"]]

        def delete_where(sql: str, values: list[Any]) -> int:
            if not values:
                return 0
            marks = ",".join("?" * len(values))
            return int(self.db.execute(sql.format(marks=marks), (*key, *values)).rowcount)

        facts = delete_where("DELETE FROM facts WHERE workspace = ? AND peer = ? AND source IN ({marks})", sources)
        observations = delete_where(
            "DELETE FROM observations WHERE workspace = ? AND peer = ? AND message_id IN ({marks})", ids
        ) + delete_where("DELETE FROM observations WHERE workspace = ? AND peer = ? AND source IN ({marks})", sources)
        messages = self.db.execute(
            "DELETE FROM messages WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread)
        ).rowcount
        self.db.execute("DELETE FROM honcho_sent WHERE workspace = ? AND peer = ? AND thread = ?", (*key, thread))
        return {"facts": facts, "observations": observations, "messages": messages}
