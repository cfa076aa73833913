"""A shared backend: PostgreSQL with pgvector, for several Thoth processes or machines.

Same bitemporal rows as the SQLite backend, in one table. Dense search is exact (`<=>`
cosine distance, no ANN index) over the scope; the lexical signal is PostgreSQL full-text
search (`ts_rank_cd` over a weighted tsvector of the turn, its neighbours and its date),
reported in the `bm25` slot. A turn has at most one current episode (a unique index on
workspace, peer and turn id, made at the first open that lacks it), so a post-turn write
replayed after a crash stores nothing new. Reads are scoped to one agent (the `agent` column,
added to older tables with the default agent for their rows); deletes are not. Needs
`pip install 'thoth-episodic[postgres]'` and `[plugins.episodic] backend = "postgres"`,
`dsn = { "$env" = "THOTH_EPISODIC_DSN" }`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from thoth_core import ThothError
from thoth_core.types import DEFAULT_AGENT

from .records import Episode, Hit, Query
from .scoring import candidate_count, date_words, index_text, query_terms, rank

COLUMNS = (
    "id, workspace, peer, thread, session_id, turn_id, user_text, assistant, summary, context, "
    "occurred_at, recorded_at, superseded_at, cost_usd, model, consolidated, agent"
)
FIELDS = [c.strip() for c in COLUMNS.replace("user_text", "user").split(",")]
AS_OF = "recorded_at <= %(as_of)s AND (superseded_at IS NULL OR superseded_at > %(as_of)s) AND occurred_at <= %(as_of)s"


def schema(dim: int) -> str:
    """The tables and indexes (idempotent)."""
    return f"""
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE IF NOT EXISTS thoth_episodes (
        rowid BIGSERIAL PRIMARY KEY,
        id TEXT NOT NULL, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
        session_id TEXT NOT NULL DEFAULT '', turn_id TEXT NOT NULL DEFAULT '',
        user_text TEXT NOT NULL, assistant TEXT NOT NULL DEFAULT '', summary TEXT NOT NULL DEFAULT '',
        context TEXT NOT NULL DEFAULT '', body TEXT NOT NULL DEFAULT '', dates TEXT NOT NULL DEFAULT '',
        occurred_at DOUBLE PRECISION NOT NULL, recorded_at DOUBLE PRECISION NOT NULL, superseded_at DOUBLE PRECISION,
        cost_usd DOUBLE PRECISION, model TEXT NOT NULL DEFAULT '', consolidated BOOLEAN NOT NULL DEFAULT FALSE,
        embedding vector({dim}),
        tsv tsvector GENERATED ALWAYS AS (
            setweight(to_tsvector('english', body), 'A') || setweight(to_tsvector('english', context), 'B')
            || setweight(to_tsvector('english', dates), 'C')) STORED
    );
    CREATE INDEX IF NOT EXISTS thoth_episodes_scope ON thoth_episodes (workspace, peer, thread, occurred_at);
    CREATE INDEX IF NOT EXISTS thoth_episodes_id ON thoth_episodes (id);
    CREATE INDEX IF NOT EXISTS thoth_episodes_turn ON thoth_episodes (turn_id);
    CREATE INDEX IF NOT EXISTS thoth_episodes_newest ON thoth_episodes (workspace, peer, occurred_at);
    CREATE INDEX IF NOT EXISTS thoth_episodes_tsv ON thoth_episodes USING gin (tsv);
    CREATE INDEX IF NOT EXISTS thoth_episodes_unembedded ON thoth_episodes (occurred_at)
        WHERE embedding IS NULL AND superseded_at IS NULL;
    ALTER TABLE thoth_episodes ADD COLUMN IF NOT EXISTS agent TEXT NOT NULL DEFAULT '{DEFAULT_AGENT}';
    """


ONE_PER_TURN = """
    DELETE FROM thoth_episodes WHERE id IN (
        SELECT e.id FROM thoth_episodes e JOIN thoth_episodes kept ON kept.workspace = e.workspace
            AND kept.peer = e.peer AND kept.turn_id = e.turn_id AND kept.superseded_at IS NULL AND kept.rowid < e.rowid
        WHERE e.turn_id <> '' AND e.superseded_at IS NULL AND kept.id <> e.id
    );
    CREATE UNIQUE INDEX thoth_episodes_one_per_turn ON thoth_episodes (workspace, peer, turn_id)
        WHERE turn_id <> '' AND superseded_at IS NULL;
"""


def _vector(values: np.ndarray) -> str:
    return "[" + ",".join(f"{v:.7g}" for v in np.asarray(values, dtype=np.float32)) + "]"


def _episode(row: Sequence[Any]) -> Episode:
    return Episode(**dict(zip(FIELDS, row, strict=True)))


class PostgresStore:
    """Episodes in PostgreSQL + pgvector; one connection per store, guarded by a lock."""

    def __init__(self, dsn: str, *, dim: int = 384) -> None:
        import psycopg

        self.dim = dim
        self._lock = threading.RLock()
        self._db = psycopg.connect(dsn, autocommit=True)
        with self._lock, self._db.transaction():
            self._db.execute("SELECT pg_advisory_xact_lock(7411)")
            self._db.execute(schema(dim))
            if self._db.execute("SELECT to_regclass('thoth_episodes_one_per_turn')").fetchone()[0] is None:
                self._db.execute(ONE_PER_TURN)  # tables made before it may hold a replayed write twice

    def _rows(self, sql: str, params: dict[str, Any] | Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._lock:
            return self._db.execute(sql, params).fetchall()

    # --- writing ----------------------------------------------------------------------

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes in one transaction; a changed known id supersedes its old version.

        An episode for a turn that already has a current episode under another id is not stored.
        """
        stored = []
        now = time.time()
        with self._lock, self._db.transaction():
            for i, episode in enumerate(episodes):
                old = self._select("id = %(id)s AND superseded_at IS NULL", {"id": episode.id})
                if (old and old[0].same_content(episode)) or self._turn_taken(episode):
                    continue
                if old:
                    self._db.execute(
                        "UPDATE thoth_episodes SET superseded_at = %s WHERE id = %s AND superseded_at IS NULL",
                        (now, episode.id),
                    )
                    episode.recorded_at = max(episode.recorded_at, now)
                values = [getattr(episode, f) for f in FIELDS]
                vector = None if vectors is None else _vector(vectors[i])
                inserted = self._db.execute(
                    f"INSERT INTO thoth_episodes ({COLUMNS}, body, dates, embedding) "
                    f"VALUES ({', '.join(['%s'] * 20)}::vector) ON CONFLICT DO NOTHING RETURNING rowid",
                    [*values, index_text(episode), date_words(episode.occurred_at), vector],
                ).fetchone()
                if inserted is not None:
                    stored.append(episode)
                elif old:  # another process wrote this turn meanwhile: the old version stays current
                    self._db.execute(
                        "UPDATE thoth_episodes SET superseded_at = NULL WHERE id = %s AND superseded_at = %s",
                        (episode.id, now),
                    )
        return stored

    def _turn_taken(self, episode: Episode) -> bool:
        """Whether another episode is already the current one of this turn (a replayed post-turn write)."""
        if not episode.turn_id:
            return False
        return bool(
            self._rows(
                "SELECT 1 FROM thoth_episodes WHERE workspace = %s AND peer = %s AND turn_id = %s "
                "AND superseded_at IS NULL AND id <> %s LIMIT 1",
                (episode.workspace, episode.peer, episode.turn_id, episode.id),
            )
        )

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the indexed neighbour context of the current version."""
        with self._lock:
            self._db.execute(
                "UPDATE thoth_episodes SET context = %s WHERE id = %s AND superseded_at IS NULL", (context, episode_id)
            )

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions."""
        with self._lock, self._db.transaction():
            for episode_id, vector in zip(ids, vectors, strict=True):
                self._db.execute(
                    "UPDATE thoth_episodes SET embedding = %s::vector WHERE id = %s AND superseded_at IS NULL",
                    (_vector(vector), episode_id),
                )

    def delete(
        self, *, workspace: str, peer: str | None = None, thread: str | None = None, ids: Sequence[str] | None = None
    ) -> int:
        """Delete every version of the matching episodes; returns how many episodes."""
        where, params = (
            ["workspace = %(workspace)s"],
            {"workspace": workspace, "peer": peer, "thread": thread, "ids": list(ids or [])},
        )
        where += ["peer = %(peer)s"] if peer is not None else []
        where += ["thread = %(thread)s"] if thread is not None else []
        where += ["id = ANY(%(ids)s)"] if ids is not None else []
        return self._delete_where(" AND ".join(where), params)

    def _delete_where(self, where: str, params: dict[str, Any]) -> int:
        rows = self._rows(f"DELETE FROM thoth_episodes WHERE {where} RETURNING id", params)
        return len({r[0] for r in rows})

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Flag episodes as absorbed by the nightly job."""
        with self._lock:
            self._db.execute("UPDATE thoth_episodes SET consolidated = TRUE WHERE id = ANY(%s)", (list(ids),))

    def purge(self, before: float, *, consolidated_only: bool) -> int:
        """Delete episodes that happened before `before`."""
        return self._delete_where(
            "occurred_at < %(before)s" + (" AND consolidated" if consolidated_only else ""), {"before": before}
        )

    # --- reading ----------------------------------------------------------------------

    def _select(self, where: str, params: dict[str, Any], tail: str = "") -> list[Episode]:
        return [_episode(r) for r in self._rows(f"SELECT {COLUMNS} FROM thoth_episodes WHERE {where} {tail}", params)]

    def get(self, episode_id: str, *, as_of: float | None = None) -> Episode | None:
        """The current (or as-of) version of one episode."""
        where = "id = %(id)s AND " + (AS_OF if as_of is not None else "superseded_at IS NULL")
        found = self._select(where, {"id": episode_id, "as_of": as_of})
        return found[0] if found else None

    def episodes(
        self,
        *,
        workspace: str | None = None,
        peer: str | None = None,
        as_of: float | None = None,
        agent: str | None = None,
    ) -> Iterator[Episode]:
        """Episodes oldest first (agent None: every agent's), in pages."""
        where = [AS_OF if as_of is not None else "superseded_at IS NULL"]
        where += ["workspace = %(workspace)s"] if workspace is not None else []
        where += ["peer = %(peer)s"] if peer is not None else []
        where += ["agent = %(agent)s"] if agent is not None else []
        last: tuple[float, int] = (float("-inf"), 0)
        while True:
            rows = self._rows(
                f"SELECT occurred_at, rowid, {COLUMNS} FROM thoth_episodes "
                f"WHERE (occurred_at, rowid) > (%(at)s, %(last)s) "
                f"AND {' AND '.join(where)} ORDER BY occurred_at, rowid LIMIT 1000",
                {"at": last[0], "last": last[1], "workspace": workspace, "peer": peer, "agent": agent, "as_of": as_of},
            )
            if not rows:
                return
            last = (rows[-1][0], rows[-1][1])
            yield from (_episode(r[2:]) for r in rows)

    def latest(self, *, workspace: str, peer: str, thread: str, agent: str = DEFAULT_AGENT) -> Episode | None:
        """The newest current episode of an agent's thread."""
        found = self._select(
            "workspace = %(w)s AND peer = %(p)s AND thread = %(t)s AND agent = %(a)s AND superseded_at IS NULL",
            {"w": workspace, "p": peer, "t": thread, "a": agent},
            "ORDER BY occurred_at DESC, rowid DESC LIMIT 1",
        )
        return found[0] if found else None

    def find_turn(self, turn_id: str) -> Episode | None:
        """The current episode of a turn."""
        found = self._select("turn_id = %(t)s AND superseded_at IS NULL", {"t": turn_id})
        return found[0] if found else None

    def unembedded(self, *, limit: int, recorded_before: float | None = None) -> list[Episode]:
        """Current episodes stored without a vector (recorded before a moment, if given), oldest first."""
        return self._select(
            "embedding IS NULL AND superseded_at IS NULL AND recorded_at < %(before)s",
            {"n": limit, "before": float("inf") if recorded_before is None else recorded_before},
            "ORDER BY occurred_at LIMIT %(n)s",
        )

    def expiring(self, before: float) -> list[Episode]:
        """Current, unconsolidated episodes that happened before `before`."""
        return self._select(
            "occurred_at < %(b)s AND NOT consolidated AND superseded_at IS NULL", {"b": before}, "ORDER BY occurred_at"
        )

    def count(self, *, workspace: str | None = None, peer: str | None = None, agent: str | None = None) -> int:
        """How many current episodes (agent None: every agent's)."""
        where = ["superseded_at IS NULL"]
        where += ["workspace = %(workspace)s"] if workspace is not None else []
        where += ["peer = %(peer)s"] if peer is not None else []
        where += ["agent = %(agent)s"] if agent is not None else []
        return int(
            self._rows(
                f"SELECT count(*) FROM thoth_episodes WHERE {' AND '.join(where)}",
                {"workspace": workspace, "peer": peer, "agent": agent},
            )[0][0]
        )

    # --- search -----------------------------------------------------------------------

    def search(self, query: Query) -> list[Hit]:
        """Exact cosine and full-text candidates over the scope, fused by `scoring.rank`."""
        visible = AS_OF if query.as_of is not None else "superseded_at IS NULL"
        mine = "workspace = %(workspace)s AND peer = %(peer)s AND agent = %(agent)s"
        scope = f"{mine} AND {visible}"
        if query.newest:
            scope += (
                f" AND rowid IN (SELECT rowid FROM thoth_episodes WHERE {mine} "
                "AND superseded_at IS NULL ORDER BY occurred_at DESC LIMIT %(newest)s)"
            )
        params: dict[str, Any] = {
            "workspace": query.workspace,
            "peer": query.peer,
            "agent": query.agent,
            "as_of": query.as_of,
            "newest": query.newest,
            "n": candidate_count(query.k),
        }
        dense: list[tuple[int, float, float]] = []
        if query.vector is not None:
            params["v"] = _vector(query.vector)
            dense = [
                (r[0], float(r[1]), r[2])
                for r in self._rows(
                    "SELECT rowid, 1 - (embedding <=> %(v)s::vector), occurred_at FROM thoth_episodes "
                    f"WHERE {scope} AND embedding IS NOT NULL "
                    "ORDER BY embedding <=> %(v)s::vector LIMIT %(n)s",
                    params,
                )
            ]
        lexical: list[tuple[int, float, float]] = []
        terms = query_terms(query.text)
        if terms:
            params["q"] = " or ".join(terms)
            lexical = [
                (r[0], float(r[1]), r[2])
                for r in self._rows(
                    "SELECT rowid, ts_rank_cd(tsv, websearch_to_tsquery('english', %(q)s)) AS r, occurred_at "
                    "FROM thoth_episodes "
                    f"WHERE {scope} AND tsv @@ websearch_to_tsquery('english', %(q)s) ORDER BY r DESC LIMIT %(n)s",
                    params,
                )
            ]
        return rank(query, dense, lexical, self._load_rows)

    def _load_rows(self, rowids: list[int]) -> dict[int, Episode]:
        rows = self._rows(f"SELECT rowid, {COLUMNS} FROM thoth_episodes WHERE rowid = ANY(%(ids)s)", {"ids": rowids})
        return {r[0]: _episode(r[1:]) for r in rows}

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._db.close()


def postgres_backend(runtime: Any, options: dict[str, Any]) -> PostgresStore:
    """Factory registered as `postgres`: `[plugins.episodic] dsn` names the database."""
    dsn = options.get("dsn")
    if not dsn:
        raise runtime.config.error(
            "plugins.episodic.dsn", 'the postgres backend needs a dsn, e.g. { "$env" = "THOTH_EPISODIC_DSN" }'
        )
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise ThothError(
            "episodic: the postgres backend needs psycopg: pip install 'thoth-episodic[postgres]'"
        ) from exc
    return PostgresStore(str(dsn), dim=int(options.get("dim", 384)))
