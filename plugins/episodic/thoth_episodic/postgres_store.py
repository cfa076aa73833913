"""A shared backend: PostgreSQL with pgvector, for several Thoth processes or machines.

Same bitemporal rows as the SQLite backend, in one table (`postgres_schema`), on a
`thoth_core.database.PostgresDatabase`: its pool of connections shared by the process's threads, on the
server's circuit, and its thread-bound transactions; while the server is found down every statement raises
`StoreDown` at once (a store opened then makes its tables once it answers). The reads that are not search
are the SQLite store's too (`episode_table`). Dense search is exact over the
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
from typing import TYPE_CHECKING, Any

import numpy as np

from thoth_core import ThothError
from thoth_core.database import PostgresDatabase

from .episode_table import FIELDS, EpisodeTable, columns, marks
from .postgres_ann import ANN_MIN_ROWS, ANN_MODES, DenseSearch
from .postgres_fts import FullTextSearch
from .postgres_schema import BUILD_MEMORY, INLINE_BUILD_ROWS, build_hnsw, migrate
from .records import Episode, Hit, Query
from .scoring import candidate_count, date_words, index_text, rank

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

NAME = "episodic"  # the store's name: with `[storage] url`, its tables are in schema `thoth_episodic`
SCHEMA = f"thoth_{NAME}"
COLUMNS = columns("user_text")
AS_OF = "recorded_at <= %(as_of)s AND (superseded_at IS NULL OR superseded_at > %(as_of)s) AND occurred_at <= %(as_of)s"


def _vector(values: np.ndarray) -> str:
    return "[" + ",".join(f"{v:.7g}" for v in np.asarray(values, dtype=np.float32)) + "]"


class PostgresStore(EpisodeTable, FullTextSearch):
    """Episodes in PostgreSQL + pgvector, on a `PostgresDatabase` (its pool); safe to use from several threads."""

    embeds_late = True  # `search` embeds the query while its full-text stage runs
    TABLE, COLUMNS, LOCK_ROWS = "thoth_episodes", COLUMNS, " FOR UPDATE"
    database: PostgresDatabase

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
        if schema not in (None, SCHEMA):
            raise ValueError(f"episodic: the tables live in schema {SCHEMA} or on the dsn's search path, not {schema}")
        self.dim, self.dsn, self.schema = dim, dsn, schema
        self.dense = DenseSearch(ann=ann, min_rows=ann_min_rows, ef_search=ef_search)
        self._builder: threading.Thread | None = None
        self._indexed, self._inline_rows, self._build_later = ann != "exact", inline_build_rows, build_in_background
        self._opened, self._build_due = False, False
        self.database = PostgresDatabase(dsn, NAME, (), in_schema=schema is not None, ready=self._migrate)
        self._opened = True
        if self._build_due:  # the tables were made as the store opened
            self._start_build()

    def _migrate(self, conn: Any) -> None:
        """Make or update the tables (at opening, or before the first statement once a server found down answers)."""
        unbuilt = migrate(
            conn, dim=self.dim, schema_name=self.schema, index=self._indexed, inline_rows=self._inline_rows
        )
        if self._indexed and not unbuilt:
            self.dense.index_built()
        elif unbuilt and self._build_later:
            self._build_due = True
            if self._opened:  # else once `database` is there (the build connects through it)
                self._start_build()

    def _start_build(self) -> None:
        self._builder = threading.Thread(target=self._build_quietly, name="episodic-hnsw-build", daemon=True)
        self._builder.start()

    @property
    def circuit(self) -> Any:
        """The server's circuit (`thoth_core.database.Circuit`)."""
        return self.database.circuit

    def build_index(self, *, memory: str = BUILD_MEMORY) -> bool:
        """Build the HNSW index if it is missing, without blocking writes; False when another worker is at it.

        `memory` is the build's maintenance_work_mem: a graph that outgrows it builds several times slower.
        """
        with self.database.connect() as conn:
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
        """This thread's transaction's psycopg connection, or a pooled one (statements in psycopg's syntax)."""
        with self.database.connection() as conn:
            yield conn

    def _rows(self, sql: str, params: dict[str, Any] | Sequence[Any] | None = None) -> list[tuple[Any, ...]]:
        """The rows of one statement in psycopg's syntax (`%(name)s`), on `_connection`."""
        with self._connection() as conn:
            cursor = conn.execute(sql, params)
            return cursor.fetchall() if cursor.description is not None else []

    # --- writing ----------------------------------------------------------------------

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes in one transaction; a changed known id supersedes its old version.

        An episode for a turn that already has a current episode under another id is not stored,
        unless it is the whole reply of a turn kept cut short: it then takes that episode's id and
        neighbour context and supersedes it (`_takes_turn`).
        """
        stored = []
        now = time.time()
        with self.database.transaction():
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
        old = self._current(episode.id)
        if old is not None and old.same_content(episode):
            return False
        execute = self.database.execute
        if old is not None:
            execute(
                "UPDATE thoth_episodes SET superseded_at = ? WHERE id = ? AND superseded_at IS NULL", (now, episode.id)
            )
            episode.recorded_at = max(episode.recorded_at, now)
        values = [getattr(episode, f) for f in FIELDS]
        inserted = execute(
            f"INSERT INTO thoth_episodes ({COLUMNS}, body, dates, embedding) "
            f"VALUES ({marks(19)}, ?::vector) ON CONFLICT DO NOTHING RETURNING rowid",
            [*values, index_text(episode), date_words(episode.occurred_at), vector],
        ).fetchall()
        if inserted:
            return True
        if old is not None:  # another process wrote this turn meanwhile: the old version stays current
            execute(
                "UPDATE thoth_episodes SET superseded_at = NULL WHERE id = ? AND superseded_at = ?", (episode.id, now)
            )
            return False
        return None

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the indexed neighbour context of the current version."""
        self.database.execute(
            "UPDATE thoth_episodes SET context = ? WHERE id = ? AND superseded_at IS NULL", (context, episode_id)
        )

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions."""
        self.database.executemany(
            "UPDATE thoth_episodes SET embedding = ?::vector WHERE id = ? AND superseded_at IS NULL",
            [(_vector(vector), episode_id) for episode_id, vector in zip(ids, vectors, strict=True)],
        )

    def _delete_where(self, where: str, params: Sequence[Any], *, forget: bool) -> int:
        rows = self.database.fetch(f"DELETE FROM thoth_episodes WHERE {where} RETURNING id", params)
        self.dense.forget_estimates()
        return len({r[0] for r in rows})

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
        if not self.database.in_transaction:
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

    def close(self) -> None:
        """Close the pool (an index build under way goes on on its own connection, or stops with the process)."""
        self.database.close()


_LEXICAL_POOL = ThreadPoolExecutor(max_workers=4, thread_name_prefix="episodic-fts")


def postgres_backend(runtime: Runtime, options: dict[str, Any]) -> PostgresStore:
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
