"""A shared backend: PostgreSQL with pgvector, for several Thoth processes or machines.

Same bitemporal rows as the SQLite backend, in one table (`postgres_schema`), reached through
a small pool of connections shared by the process's threads, on the server's circuit
(`thoth_core.database.CircuitPool`): while the server is found down every statement raises
`StoreDown` at once (a store opened then makes its tables once it answers). Dense search is exact over the
scope, or through a pgvector HNSW index for large scopes (`postgres_ann`); the lexical signal
is PostgreSQL full-text search (each word's `ts_rank` over a weighted tsvector of the turn,
its neighbours and its date, weighted by the word's rarity: `postgres_fts`), reported in the
`bm25` slot, run on a second connection while the dense search runs. A turn has at most one current episode
(a unique index on workspace, peer and turn id), so a post-turn write replayed after a crash
stores nothing new. Reads are scoped to one agent (the `agent` column, added to older tables
with the default agent for their rows); deletes are not.

With `[storage] url` set this is the default backend, its tables in schema `thoth_episodic`
of that database; `backend = "postgres"` with `dsn = { "$env" = "THOTH_EPISODIC_DSN" }`
names a database of its own (tables on that connection's search path). Needs
`pip install 'thoth-episodic[postgres]'`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import numpy as np

from thoth_core import ThothError
from thoth_core.types import DEFAULT_AGENT

from .postgres_ann import ANN_MIN_ROWS, ANN_MODES, DenseSearch
from .postgres_fts import FullTextSearch
from .postgres_schema import BUILD_MEMORY, INLINE_BUILD_ROWS, build_hnsw, migrate
from .records import Episode, Hit, Query
from .scoring import candidate_count, date_words, index_text, rank

logger = logging.getLogger(__name__)

SCHEMA = "thoth_episodic"  # where the tables live in the `[storage] url` database
COLUMNS = (
    "id, workspace, peer, thread, session_id, turn_id, user_text, assistant, summary, context, "
    "occurred_at, recorded_at, superseded_at, cost_usd, model, consolidated, agent"
)
FIELDS = [c.strip() for c in COLUMNS.replace("user_text", "user").split(",")]
AS_OF = "recorded_at <= %(as_of)s AND (superseded_at IS NULL OR superseded_at > %(as_of)s) AND occurred_at <= %(as_of)s"


def _vector(values: np.ndarray) -> str:
    return "[" + ",".join(f"{v:.7g}" for v in np.asarray(values, dtype=np.float32)) + "]"


def _episode(row: Sequence[Any]) -> Episode:
    return Episode(**dict(zip(FIELDS, row, strict=True)))


class PostgresStore(FullTextSearch):
    """Episodes in PostgreSQL + pgvector, through a connection pool; safe to use from several threads."""

    embeds_late = True  # `search` embeds the query while its full-text stage runs

    def __init__(
        self,
        dsn: str,
        *,
        dim: int = 384,
        schema: str | None = None,
        ann: str = "auto",
        ann_min_rows: int = ANN_MIN_ROWS,
        ef_search: int | None = None,
        build_in_background: bool = True,
        inline_build_rows: int = INLINE_BUILD_ROWS,
    ) -> None:
        from thoth_core.database import CircuitPool, circuit

        self.dim, self.dsn, self.schema = dim, dsn, schema
        self.dense = DenseSearch(ann=ann, min_rows=ann_min_rows, ef_search=ef_search)
        self._connect_options: dict[str, Any] = {"autocommit": True}
        if schema is not None:
            self._connect_options["options"] = f"-c search_path={schema},public"
        self._bound = threading.local()
        self._builder: threading.Thread | None = None
        self._indexed, self._inline_rows, self._build_later = ann != "exact", inline_build_rows, build_in_background
        self.circuit = circuit(dsn)  # before the pool: its first connection may start a build that needs it
        self._pool = CircuitPool(dsn, name="thoth_episodic", kwargs=self._connect_options, ready=self._migrate)

    def _migrate(self, conn: Any) -> None:
        """Make or update the tables (at opening, or before the first statement once a server found down answers)."""
        unbuilt = migrate(
            conn, dim=self.dim, schema_name=self.schema, index=self._indexed, inline_rows=self._inline_rows
        )
        if self._indexed and not unbuilt:
            self.dense.index_built()
        elif unbuilt and self._build_later:
            self._builder = threading.Thread(target=self._build_quietly, name="episodic-hnsw-build", daemon=True)
            self._builder.start()

    def build_index(self, *, memory: str = BUILD_MEMORY) -> bool:
        """Build the HNSW index if it is missing, without blocking writes; False when another worker is at it.

        `memory` is the build's maintenance_work_mem: a graph that outgrows it builds several times slower.
        """
        with self.circuit.connect(**self._connect_options) as conn:
            built = build_hnsw(conn, memory=memory)
        if built:
            self.dense.index_built()
        return built

    def _build_quietly(self) -> None:
        """`build_index` in the background: recall is exact until it is done; a failure is logged, not raised."""
        started = time.monotonic()
        logger.info("episodic: building the HNSW index of %s in the background", self.where)
        try:
            if self.build_index():
                logger.info("episodic: HNSW index built in %.0f s", time.monotonic() - started)
        except Exception as exc:  # the server went away, or the process is closing: the next start tries again
            logger.warning("episodic: the HNSW index was not built (%s); recall stays exact", exc)

    @property
    def where(self) -> str:
        """The database (and schema) for messages, without credentials."""
        from psycopg.conninfo import conninfo_to_dict

        info = conninfo_to_dict(self.dsn)
        place = f"{info.get('host', 'localhost')}/{info.get('dbname', '')}"
        return f"{place} schema {self.schema}" if self.schema else place

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """This thread's transaction's connection, or one from the pool."""
        bound = getattr(self._bound, "conn", None)
        if bound is not None:
            yield bound
            return
        with self._pool.connection() as conn:
            yield conn

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A transaction on one pooled connection; statements of this thread run in it until it ends."""
        if getattr(self._bound, "conn", None) is not None:
            yield self._bound.conn
            return
        with self._pool.connection() as conn, conn.transaction():
            self._bound.conn = conn
            try:
                yield conn
            finally:
                self._bound.conn = None

    def _rows(self, sql: str, params: dict[str, Any] | Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    def _run(self, sql: str, params: dict[str, Any] | Sequence[Any] | None = None) -> None:
        with self._connection() as conn:
            conn.execute(sql, params)

    # --- writing ----------------------------------------------------------------------

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes in one transaction; a changed known id supersedes its old version.

        An episode for a turn that already has a current episode under another id is not stored,
        unless it is the whole reply of a turn kept cut short: it then takes that episode's id and
        neighbour context and supersedes it (`_takes_turn`).
        """
        stored = []
        now = time.time()
        with self._transaction():
            for i, episode in enumerate(episodes):
                vector = None if vectors is None else _vector(vectors[i])
                outcome = self._add_one(episode, vector, now)
                if outcome is None:  # another process stored this turn meanwhile: decide again, once
                    outcome = self._add_one(episode, vector, now)
                if outcome:
                    stored.append(episode)
        return stored

    def _add_one(self, episode: Episode, vector: str | None, now: float) -> bool | None:
        """Store one episode in the open transaction: True if stored, False if not, None on a conflicting turn."""
        if not self._takes_turn(episode):
            return False
        old = self._select("id = %(id)s AND superseded_at IS NULL", {"id": episode.id})
        if old and old[0].same_content(episode):
            return False
        if old:
            self._run(
                "UPDATE thoth_episodes SET superseded_at = %s WHERE id = %s AND superseded_at IS NULL",
                (now, episode.id),
            )
            episode.recorded_at = max(episode.recorded_at, now)
        values = [getattr(episode, f) for f in FIELDS]
        inserted = self._rows(
            f"INSERT INTO thoth_episodes ({COLUMNS}, body, dates, embedding) "
            f"VALUES ({', '.join(['%s'] * 20)}::vector) ON CONFLICT DO NOTHING RETURNING rowid",
            [*values, index_text(episode), date_words(episode.occurred_at), vector],
        )
        if inserted:
            return True
        if old:  # another process wrote this turn meanwhile: the old version stays current
            self._run(
                "UPDATE thoth_episodes SET superseded_at = NULL WHERE id = %s AND superseded_at = %s",
                (episode.id, now),
            )
            return False
        return None

    def _takes_turn(self, episode: Episode) -> bool:
        """Whether the episode may be its turn's current one; one replacing a cut-short version takes its id.

        False when another episode is the turn's current one and stays (a replayed post-turn write).
        The kept row is locked, so two processes replacing it at once replace it once.
        """
        if not episode.turn_id:
            return True
        found = self._rows(
            f"SELECT {COLUMNS} FROM thoth_episodes WHERE workspace = %s AND peer = %s AND turn_id = %s "
            "AND superseded_at IS NULL AND id <> %s LIMIT 1 FOR UPDATE",
            (episode.workspace, episode.peer, episode.turn_id, episode.id),
        )
        if not found:
            return True
        kept = _episode(found[0])
        if not episode.replaces(kept):
            return False
        episode.id, episode.context = kept.id, kept.context
        return True

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the indexed neighbour context of the current version."""
        self._run(
            "UPDATE thoth_episodes SET context = %s WHERE id = %s AND superseded_at IS NULL", (context, episode_id)
        )

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions."""
        with self._transaction():
            for episode_id, vector in zip(ids, vectors, strict=True):
                self._run(
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
        self.dense.forget_estimates()
        return len({r[0] for r in rows})

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Flag episodes as absorbed by the nightly job."""
        self._run("UPDATE thoth_episodes SET consolidated = TRUE WHERE id = ANY(%s)", (list(ids),))

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
        """Cosine (`postgres_ann`) and full-text candidates over the scope, fused by `scoring.rank`."""
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
        lexical: Future[list[tuple[int, float, float]]] = Future()
        if getattr(self._bound, "conn", None) is None:
            lexical = _LEXICAL_POOL.submit(self._lexical, query.text, scope, params)  # its own connection, meanwhile
        else:  # in this thread's transaction: on its connection, which sees what the transaction wrote
            lexical.set_result(self._lexical(query.text, scope, params))
        query = query.with_vector()  # the query is embedded while the full-text stage runs
        dense: list[tuple[int, float, float]] = []
        if query.vector is not None:
            with self._connection() as conn:
                asked = params | {"v": _vector(query.vector)}
                dense = self.dense.search(conn, scope=scope, params=asked, n=params["n"])
        return rank(query, dense, lexical.result(), self._load_rows)

    def _load_rows(self, rowids: list[int]) -> dict[int, Episode]:
        rows = self._rows(f"SELECT rowid, {COLUMNS} FROM thoth_episodes WHERE rowid = ANY(%(ids)s)", {"ids": rowids})
        return {r[0]: _episode(r[1:]) for r in rows}

    def close(self) -> None:
        """Close the pool (an index build under way goes on on its own connection, or stops with the process)."""
        self._pool.close()


_LEXICAL_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="episodic-fts")


def postgres_backend(runtime: Any, options: dict[str, Any]) -> PostgresStore:
    """Factory registered as `postgres`: `[plugins.episodic] dsn`, else the `[storage] url` database; `ann` keys."""
    from thoth_core.database import storage_url

    dsn, schema = options.get("dsn"), None
    if not dsn:
        dsn, schema = storage_url(runtime.config), SCHEMA
    if not dsn:
        raise runtime.config.error(
            "plugins.episodic.dsn", 'the postgres backend needs a dsn, e.g. { "$env" = "THOTH_EPISODIC_DSN" }'
        )
    ann = options.get("ann") or "auto"
    if ann not in ANN_MODES:
        raise runtime.config.error("plugins.episodic.ann", f'expected "auto", "exact" or "hnsw", got {ann!r}')
    limit, expansion = runtime.config.integer, options.get("ann_expansion")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ThothError(
            "episodic: the postgres backend needs psycopg and psycopg-pool: "
            f"pip install 'thoth-episodic[postgres]' ({exc})"
        ) from exc
    return PostgresStore(
        str(dsn),
        dim=int(options.get("dim", 384)),
        schema=schema,
        ann=ann,
        ann_min_rows=limit("plugins.episodic.ann_min_rows", options.get("ann_min_rows", ANN_MIN_ROWS), high=10**9),
        ef_search=None if expansion is None else limit("plugins.episodic.ann_expansion", expansion, low=1, high=4096),
    )
