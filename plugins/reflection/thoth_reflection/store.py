"""Reflection's own database: audit log, runs, queue, check-ins, progress, claims and (shared) documents.

The SQLite file `$THOTH_HOME/reflection/reflection.db`, or the schema `thoth_reflection` of the
shared PostgreSQL when `[storage] url` is set (`thoth_core.database`), so every worker sees one
queue and one audit log. The audit log is append-only and permanent (only `forget` blanks a
person's payloads). Decisions and claims are conditional writes, so of several processes racing
for the same item or session exactly one wins.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core.config import Config
from thoth_core.database import open_database, worker_id

if TYPE_CHECKING:
    from thoth_core import Session

MIGRATIONS = [
    """
    CREATE TABLE audit (id INTEGER PRIMARY KEY, at REAL NOT NULL, event TEXT NOT NULL, run_id TEXT,
                        session_id TEXT, actor TEXT, payload TEXT NOT NULL);
    CREATE INDEX audit_run ON audit(run_id);
    CREATE TABLE runs (run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, workspace TEXT, peer TEXT, thread TEXT,
                       started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL, error TEXT);
    CREATE INDEX runs_session ON runs(session_id);
    CREATE TABLE items (id TEXT PRIMARY KEY, kind TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
                        source TEXT NOT NULL, flags TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL,
                        created_at REAL NOT NULL, decided_at REAL, decided_by TEXT, reason TEXT);
    CREATE TABLE check_ins (id TEXT PRIMARY KEY, workspace TEXT, peer TEXT, thread TEXT, at REAL NOT NULL,
                            text TEXT NOT NULL, session_id TEXT, run_id TEXT, delivered_at REAL);
    CREATE TABLE consolidated (key TEXT PRIMARY KEY, kind TEXT NOT NULL, at REAL NOT NULL);
    CREATE TABLE peers (peer TEXT PRIMARY KEY, last_seen REAL NOT NULL);
    """,
    """
    CREATE TABLE reflected (session_id TEXT PRIMARY KEY, last_turn_id TEXT NOT NULL, turns INTEGER NOT NULL,
                            at REAL NOT NULL);
    """,
    """
    ALTER TABLE items ADD COLUMN tier TEXT NOT NULL DEFAULT '';
    """,
    """
    CREATE TABLE reflexion_tried (turn_id TEXT PRIMARY KEY, session_id TEXT, at REAL NOT NULL);
    """,
    """
    CREATE TABLE claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, at REAL NOT NULL);
    CREATE TABLE documents (name TEXT PRIMARY KEY, text TEXT NOT NULL, at REAL NOT NULL);
    CREATE TABLE transient (id TEXT PRIMARY KEY, kind TEXT NOT NULL, day TEXT NOT NULL, session_id TEXT NOT NULL,
                            run_id TEXT NOT NULL, text TEXT NOT NULL, at REAL NOT NULL);
    """,
]
POSTGRES = [  # the schema of every SQLite migration above, in one step
    """
    CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, at DOUBLE PRECISION NOT NULL, event TEXT NOT NULL, run_id TEXT,
                        session_id TEXT, actor TEXT, payload TEXT NOT NULL);
    CREATE INDEX audit_run ON audit(run_id);
    CREATE TABLE runs (run_id TEXT PRIMARY KEY, session_id TEXT NOT NULL, workspace TEXT, peer TEXT, thread TEXT,
                       started_at DOUBLE PRECISION NOT NULL, finished_at DOUBLE PRECISION, status TEXT NOT NULL,
                       error TEXT);
    CREATE INDEX runs_session ON runs(session_id);
    CREATE TABLE items (id TEXT PRIMARY KEY, kind TEXT NOT NULL, title TEXT NOT NULL, text TEXT NOT NULL,
                        source TEXT NOT NULL, flags TEXT NOT NULL, payload TEXT NOT NULL, status TEXT NOT NULL,
                        created_at DOUBLE PRECISION NOT NULL, decided_at DOUBLE PRECISION, decided_by TEXT,
                        reason TEXT, tier TEXT NOT NULL DEFAULT '');
    CREATE TABLE check_ins (id TEXT PRIMARY KEY, workspace TEXT, peer TEXT, thread TEXT, at DOUBLE PRECISION NOT NULL,
                            text TEXT NOT NULL, session_id TEXT, run_id TEXT, delivered_at DOUBLE PRECISION);
    CREATE TABLE consolidated (key TEXT PRIMARY KEY, kind TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE peers (peer TEXT PRIMARY KEY, last_seen DOUBLE PRECISION NOT NULL);
    CREATE TABLE reflected (session_id TEXT PRIMARY KEY, last_turn_id TEXT NOT NULL, turns INTEGER NOT NULL,
                            at DOUBLE PRECISION NOT NULL);
    CREATE TABLE reflexion_tried (turn_id TEXT PRIMARY KEY, session_id TEXT, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE claims (key TEXT PRIMARY KEY, owner TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE documents (name TEXT PRIMARY KEY, text TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE transient (id TEXT PRIMARY KEY, kind TEXT NOT NULL, day TEXT NOT NULL, session_id TEXT NOT NULL,
                            run_id TEXT NOT NULL, text TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    """,
]
FORGOTTEN = '{"forgotten": true}'  # an audit payload after forget
ME = worker_id()  # who holds a claim taken by this process


class Store:
    """The reflection database."""

    def __init__(self, path: Path, config: Any = None) -> None:
        self.path = path
        self.lock = threading.RLock()  # groups statements of this process; `db.lock` excludes other processes
        self.db = open_database(
            config if config is not None else Config(),
            "reflection",
            path=path,
            migrations=MIGRATIONS,
            postgres=POSTGRES,
            rows=True,
        )
        self.shared = self.db.dialect == "postgres"

    def close(self) -> None:
        """Close the connection(s)."""
        with self.lock:
            self.db.close()

    def query(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        """Rows of a SELECT as dicts."""
        with self.lock:
            return [dict(zip(row.keys(), row, strict=True)) for row in self.db.execute(sql, args).fetchall()]

    def execute(self, sql: str, *args: Any) -> int:
        """Run one statement; returns the number of rows changed."""
        with self.lock:
            return self.db.execute(sql, args).rowcount

    # --- audit ------------------------------------------------------------------------

    def audit(
        self,
        event: str,
        payload: dict[str, Any],
        *,
        run_id: str | None = None,
        session_id: str | None = None,
        actor: str | None = None,
    ) -> None:
        """Append one permanent audit entry."""
        self.execute(
            "INSERT INTO audit (at, event, run_id, session_id, actor, payload) VALUES (?, ?, ?, ?, ?, ?)",
            time.time(),
            event,
            run_id,
            session_id,
            actor,
            json.dumps(payload, default=str),
        )

    def audit_log(self, *, run_id: str | None = None, event: str | None = None) -> list[dict[str, Any]]:
        """Audit entries in order, optionally of one run or one event kind."""
        where, args = _where({"run_id": run_id, "event": event})
        rows = self.query(f"SELECT * FROM audit {where} ORDER BY id", *args)
        return [dict(row, payload=json.loads(row["payload"])) for row in rows]

    # --- runs -------------------------------------------------------------------------

    def start_run(self, run_id: str, session: Session) -> None:
        """Record a run as started."""
        self.execute(
            "INSERT INTO runs (run_id, session_id, workspace, peer, thread, started_at, status)"
            " VALUES (?, ?, ?, ?, ?, ?, 'running')",
            run_id,
            session.id,
            session.workspace,
            session.peer,
            session.thread,
            time.time(),
        )
        self.execute(
            "INSERT INTO peers (peer, last_seen) VALUES (?, ?)"
            " ON CONFLICT (peer) DO UPDATE SET last_seen = excluded.last_seen",
            session.peer,
            time.time(),
        )

    def finish_run(self, run_id: str, status: str, error: str | None = None) -> None:
        """Record how a run ended: ok, failed or skipped."""
        self.execute(
            "UPDATE runs SET status = ?, error = ?, finished_at = ? WHERE run_id = ?",
            status,
            error,
            time.time(),
            run_id,
        )

    def runs(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """Runs, newest first."""
        where, args = _where({"session_id": session_id})
        return self.query(f"SELECT * FROM runs {where} ORDER BY started_at DESC", *args)

    def reflected(self, session_id: str) -> dict[str, Any] | None:
        """How far a successful run covered a session: `last_turn_id` and `turns`, or None."""
        rows = self.query("SELECT last_turn_id, turns FROM reflected WHERE session_id = ?", session_id)
        return rows[0] if rows else None

    def mark_reflected(self, session_id: str, last_turn_id: str, turns: int) -> None:
        """Remember that a session is reflected up to this turn (the first `turns` turns)."""
        self.execute(
            "INSERT INTO reflected (session_id, last_turn_id, turns, at) VALUES (?, ?, ?, ?) ON CONFLICT (session_id)"
            " DO UPDATE SET last_turn_id = excluded.last_turn_id, turns = excluded.turns, at = excluded.at",
            session_id,
            last_turn_id,
            turns,
            time.time(),
        )

    def known_peers(self) -> set[str]:
        """Every peer a reflection ran for."""
        return {row["peer"] for row in self.query("SELECT peer FROM peers")}

    # --- approval queue ---------------------------------------------------------------

    def add_item(
        self,
        item_id: str,
        *,
        kind: str,
        title: str,
        text: str,
        source: dict[str, Any],
        flags: list[str],
        payload: dict[str, Any],
        tier: str = "",
    ) -> None:
        """Queue an item for a person's decision (`tier`: its risk tier, see `tiers`)."""
        self.execute(
            "INSERT INTO items (id, kind, title, text, source, flags, payload, status, created_at, tier)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
            item_id,
            kind,
            title,
            text,
            json.dumps(source),
            json.dumps(flags),
            json.dumps(payload),
            time.time(),
            tier,
        )

    def item(self, item_id: str) -> dict[str, Any] | None:
        """One queued item (any status), or None."""
        rows = self.query("SELECT * FROM items WHERE id = ?", item_id)
        return _item(rows[0]) if rows else None

    def all_items(self) -> list[dict[str, Any]]:
        """Every queued item, whatever its status."""
        return [_item(row) for row in self.query("SELECT * FROM items ORDER BY created_at, id")]

    def pending(self) -> list[dict[str, Any]]:
        """Items waiting for a decision, oldest first."""
        return [
            _item(row) for row in self.query("SELECT * FROM items WHERE status = 'pending' ORDER BY created_at, id")
        ]

    def settle(self, item_id: str, status: str, *, actor: str, reason: str = "", text: str | None = None) -> bool:
        """Decide a pending item (and set its final text); False when it was decided already, here or elsewhere.

        One conditional UPDATE, so of several processes deciding one item at once exactly one gets True.
        """
        return (
            self.execute(
                "UPDATE items SET status = ?, decided_at = ?, decided_by = ?, reason = ?, text = COALESCE(?, text)"
                " WHERE id = ? AND status = 'pending'",
                status,
                time.time(),
                actor,
                reason,
                text,
                item_id,
            )
            == 1
        )

    def items_of_kind(self, kind: str) -> list[dict[str, Any]]:
        """Every item of one kind (any status), oldest first."""
        return [_item(row) for row in self.query("SELECT * FROM items WHERE kind = ? ORDER BY created_at, id", kind)]

    def set_source(self, item_id: str, source: dict[str, Any]) -> None:
        """Replace an item's source (where it came from)."""
        self.execute("UPDATE items SET source = ? WHERE id = ?", json.dumps(source), item_id)

    def edit(self, item_id: str, text: str) -> bool:
        """Replace a pending item's text; False when it was decided meanwhile."""
        return self.execute("UPDATE items SET text = ? WHERE id = ? AND status = 'pending'", text, item_id) == 1

    def claim_reflexion(self, turn_id: str, session_id: str) -> bool:
        """Claim a failed turn for one reflexion draft; False when some process tried it already."""
        return (
            self.execute(
                "INSERT INTO reflexion_tried (turn_id, session_id, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                turn_id,
                session_id,
                time.time(),
            )
            == 1
        )

    def release_reflexion(self, turn_id: str) -> None:
        """Give a claimed failed turn back (its draft failed), so a later attempt may draft it."""
        self.execute("DELETE FROM reflexion_tried WHERE turn_id = ?", turn_id)

    def claim(self, key: str, *, seconds: float) -> bool:
        """Take the claim `key` (a session's reflection, the nightly job) for `seconds`; False while another holds it.

        A claim its holder did not release (a dead worker) lapses after `seconds`.
        """
        now = time.time()
        return (
            self.execute(
                "INSERT INTO claims (key, owner, at) VALUES (?, ?, ?) ON CONFLICT (key)"
                " DO UPDATE SET owner = excluded.owner, at = excluded.at WHERE claims.at < ?",
                key,
                ME,
                now,
                now - seconds,
            )
            == 1
        )

    def release(self, key: str) -> None:
        """Give back a claim this process holds."""
        self.execute("DELETE FROM claims WHERE key = ? AND owner = ?", key, ME)

    # --- check-ins --------------------------------------------------------------------

    def add_check_in(self, check_in_id: str, *, at: float, text: str, session: Any, run_id: str) -> None:
        """Store a check-in durably."""
        self.execute(
            "INSERT INTO check_ins (id, workspace, peer, thread, at, text, session_id, run_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET workspace = excluded.workspace,"
            " peer = excluded.peer, thread = excluded.thread, at = excluded.at, text = excluded.text,"
            " session_id = excluded.session_id, run_id = excluded.run_id, delivered_at = NULL",
            check_in_id,
            session.workspace,
            session.peer,
            session.thread,
            at,
            text,
            session.id,
            run_id,
        )

    def take_due_check_ins(
        self, now: float, accept: Callable[[dict[str, Any]], bool] = lambda _row: True
    ) -> list[dict[str, Any]]:
        """Undelivered check-ins due by `now` that `accept` takes, marked delivered as they are taken.

        Each is taken by one conditional UPDATE, so a check-in two workers find due is delivered once.
        """
        with self.lock:
            due = self.query("SELECT * FROM check_ins WHERE delivered_at IS NULL AND at <= ? ORDER BY at", now)
            return [
                row
                for row in due
                if accept(dict(row))
                and self.execute(
                    "UPDATE check_ins SET delivered_at = ? WHERE id = ? AND delivered_at IS NULL", now, row["id"]
                )
                == 1
            ]

    # --- nightly bookkeeping ----------------------------------------------------------

    def is_consolidated(self, key: str) -> bool:
        """Whether the nightly job already absorbed this record."""
        return bool(self.query("SELECT 1 FROM consolidated WHERE key = ?", key))

    def mark_consolidated(self, keys: list[str], kind: str) -> None:
        """Remember records the nightly job absorbed."""
        with self.lock, self.db.transaction():
            for key in keys:
                self.execute(
                    "INSERT INTO consolidated (key, kind, at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    key,
                    kind,
                    time.time(),
                )

    # --- forget -----------------------------------------------------------------------

    def forget_rows(
        self, scope: dict[str, str], *, sessions: set[str], items: list[str], whole_peer: bool
    ) -> tuple[int, int]:
        """Delete and blank what concerns a peer (`scope`: workspace, peer[, thread]), in one transaction;
        returns (check-ins deleted, audit entries blanked). `db.scrub` afterwards erases the old pages."""
        where = " AND ".join(f"{column} = ?" for column in scope)
        args = list(scope.values())
        with self.lock, self.db.transaction():
            for item_id in items:
                self.execute("DELETE FROM items WHERE id = ?", item_id)
            check_ins = self.execute(f"DELETE FROM check_ins WHERE {where}", *args)
            for session_id in sessions:
                self.execute("UPDATE runs SET error = NULL WHERE session_id = ?", session_id)
            blanked = sum(
                self.execute("UPDATE audit SET payload = ? WHERE session_id = ?", FORGOTTEN, s) for s in sessions
            )
            for item_id in items:  # items without a session (knowledge promotions) are audited under their id
                blanked += sum(
                    self.execute("UPDATE audit SET payload = ? WHERE id = ?", FORGOTTEN, n)
                    for n in self._audit_of(item_id)
                )
            self.execute(f"UPDATE runs SET peer = '(forgotten)' WHERE {where}", *args)
            if whole_peer:
                self.execute("DELETE FROM peers WHERE peer = ?", scope["peer"])
        return check_ins, blanked

    def _audit_of(self, item_id: str) -> list[int]:
        """Ids of the audit entries whose payload names this item (portable: no JSON functions in SQL)."""
        rows = self.query("SELECT id, payload FROM audit WHERE payload LIKE ?", f"%{item_id}%")
        return [row["id"] for row in rows if _payload_item(row["payload"]) == item_id]


def _payload_item(payload: str) -> Any:
    try:
        loaded = json.loads(payload)
    except ValueError:
        return None
    return loaded.get("item") if isinstance(loaded, dict) else None


def _where(filters: dict[str, Any]) -> tuple[str, list[Any]]:
    parts = [(f"{column} = ?", value) for column, value in filters.items() if value is not None]
    if not parts:
        return "", []
    return "WHERE " + " AND ".join(p for p, _ in parts), [v for _, v in parts]


def _item(row: dict[str, Any]) -> dict[str, Any]:
    return dict(
        row, source=json.loads(row["source"]), flags=json.loads(row["flags"]), payload=json.loads(row["payload"])
    )
