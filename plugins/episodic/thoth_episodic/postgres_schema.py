"""The PostgreSQL backend's tables and indexes, made or brought up to date once per start, under a lock.

`migrate` runs in one transaction holding an advisory lock, so workers starting at once
apply each step once; a table already up to date gets no DDL at all (DDL takes table locks
that would queue behind a running index build). The pgvector HNSW index
(`thoth_episodes_hnsw`, cosine) is made with the table; on a table that already holds many
rows it is built by `build_hnsw` with `CREATE INDEX CONCURRENTLY` (writes go on meanwhile),
by one worker at a time, and an interrupted build's invalid index is dropped and redone.
"""

from __future__ import annotations

from typing import Any

from thoth_core.types import DEFAULT_AGENT

MIGRATION_LOCK = 7411  # the advisory lock key the schema changes run under (one per database)
HNSW_INDEX = "thoth_episodes_hnsw"
HNSW_M = 24  # graph degree and build-time candidate list (pgvector defaults 16 and 64; see bench/postgres_recall.py)
HNSW_EF_CONSTRUCTION = 80
INLINE_BUILD_ROWS = 5_000  # below this many embedded rows the index is built at once, in the start-up transaction
BUILD_MEMORY = "1GB"  # maintenance_work_mem of a build: a graph that outgrows it builds several times slower


def schema(dim: int) -> str:
    """The tables and indexes (idempotent)."""
    return f"""
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
    CREATE INDEX IF NOT EXISTS thoth_episodes_tsv ON thoth_episodes USING gin (tsv) WITH (fastupdate = off);
    CREATE INDEX IF NOT EXISTS thoth_episodes_unembedded ON thoth_episodes (occurred_at)
        WHERE embedding IS NULL AND superseded_at IS NULL;
    ALTER TABLE thoth_episodes ADD COLUMN IF NOT EXISTS agent TEXT NOT NULL DEFAULT '{DEFAULT_AGENT}';
    ALTER TABLE thoth_episodes ALTER COLUMN embedding SET STORAGE MAIN, ALTER COLUMN tsv SET STORAGE MAIN;
    ALTER INDEX thoth_episodes_tsv SET (fastupdate = off);
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

# Vectors and the full-text vector stay in the row (storage MAIN; the texts go out of line instead): out of
# line (TOAST), each exact distance or each full-text match read four pages, not one.
# The full-text index takes each insert at once (no fastupdate): a search scanned its pending list, up to 4 MB.
UP_TO_DATE = """
    SELECT to_regclass('thoth_episodes_one_per_turn') IS NOT NULL
        AND EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass('thoth_episodes') AND attname = 'agent'
            AND NOT attisdropped)
        AND 2 = (SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass('thoth_episodes')
            AND attname IN ('embedding', 'tsv') AND attstorage = 'm')
        AND 'fastupdate=off' = ANY(coalesce((SELECT reloptions FROM pg_class
            WHERE oid = to_regclass('thoth_episodes_tsv')), '{}'))
"""


def hnsw_ddl(*, concurrently: bool) -> str:
    """The statement that makes the HNSW index when it is missing."""
    how = "CONCURRENTLY " if concurrently else ""
    return (
        f"CREATE INDEX {how}IF NOT EXISTS {HNSW_INDEX} ON thoth_episodes USING hnsw (embedding vector_cosine_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
    )


def migrate(conn: Any, *, dim: int, schema_name: str | None, index: bool, inline_rows: int = INLINE_BUILD_ROWS) -> bool:
    """Make or update the tables in one locked transaction; True when the HNSW index still has to be built.

    With `index`, a missing HNSW index is made here when the table has fewer than `inline_rows`
    embedded rows, else left to `build_hnsw`.
    """
    with conn.transaction():
        conn.execute(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})")
        if schema_name is not None:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema_name}")
        else:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        if not conn.execute(UP_TO_DATE).fetchone()[0]:
            conn.execute(schema(dim))
            if conn.execute("SELECT to_regclass('thoth_episodes_one_per_turn')").fetchone()[0] is None:
                conn.execute(ONE_PER_TURN)  # tables made before it may hold a replayed write twice
        if not index or hnsw_state(conn) is not None:
            return index and hnsw_state(conn) is False
        embedded = conn.execute(
            "SELECT count(*) FROM (SELECT 1 FROM thoth_episodes WHERE embedding IS NOT NULL LIMIT %s) AS embedded",
            (inline_rows,),
        ).fetchone()[0]
        if embedded < inline_rows:
            conn.execute(hnsw_ddl(concurrently=False))
            return False
        return True


def hnsw_state(conn: Any) -> bool | None:
    """Whether the HNSW index is usable (True), being built or left invalid by a failed build (False), or missing."""
    row = conn.execute(f"SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('{HNSW_INDEX}')").fetchone()
    return None if row is None else bool(row[0])


def build_hnsw(conn: Any, *, memory: str = BUILD_MEMORY) -> bool:
    """Build the missing HNSW index without blocking writes (autocommit `conn`); False when another worker is at it."""
    key = f"hashtextextended(current_schema() || '.{HNSW_INDEX}', 0)"
    if not conn.execute(f"SELECT pg_try_advisory_lock({key})").fetchone()[0]:
        return False
    try:
        state = hnsw_state(conn)
        if state is False:  # a build that died (its worker was stopped) left an invalid index behind
            conn.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {HNSW_INDEX}")
        if state is not True:
            conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (memory,))
            conn.execute(hnsw_ddl(concurrently=True))
        return True
    finally:
        conn.execute(f"SELECT pg_advisory_unlock({key})")
