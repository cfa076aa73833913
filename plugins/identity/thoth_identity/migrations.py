"""The identity store's schema: SQLite's numbered migrations (`PRAGMA user_version`), and PostgreSQL's."""

from __future__ import annotations

import sqlite3

from thoth_core.storage import Migration

# 1: peers, their messages, observations (with full-text index), hard facts, Honcho cache.
M001_CREATE_TABLES = """
        CREATE TABLE peers (
            workspace TEXT NOT NULL, peer TEXT NOT NULL, owner TEXT NOT NULL, created_at REAL NOT NULL,
            PRIMARY KEY (workspace, peer)
        );
        CREATE TABLE messages (
            id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
            session_id TEXT NOT NULL, turn_id TEXT, role TEXT NOT NULL, content TEXT NOT NULL, at REAL NOT NULL
        );
        CREATE INDEX messages_peer ON messages (workspace, peer, thread);
        CREATE TABLE observations (
            id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, owner TEXT NOT NULL,
            content TEXT NOT NULL, kind TEXT NOT NULL, author TEXT NOT NULL, confidence REAL NOT NULL,
            message_id INTEGER, source TEXT NOT NULL, created_at REAL NOT NULL
        );
        CREATE INDEX observations_peer ON observations (workspace, peer, created_at);
        CREATE INDEX observations_content ON observations (workspace, peer, content);
        CREATE VIRTUAL TABLE observations_fts USING fts5 (
            owner, content, content='observations', content_rowid='id', tokenize='porter unicode61'
        );
        CREATE TRIGGER observations_ai AFTER INSERT ON observations BEGIN
            INSERT INTO observations_fts (rowid, owner, content) VALUES (new.id, new.owner, new.content);
        END;
        CREATE TRIGGER observations_ad AFTER DELETE ON observations BEGIN
            INSERT INTO observations_fts (observations_fts, rowid, owner, content)
            VALUES ('delete', old.id, old.owner, old.content);
        END;
        CREATE TABLE facts (
            id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, subject TEXT NOT NULL,
            predicate TEXT NOT NULL, object TEXT NOT NULL, confidence REAL NOT NULL, source TEXT NOT NULL,
            valid_from REAL NOT NULL, valid_to REAL
        );
        CREATE INDEX facts_peer ON facts (workspace, peer, predicate, valid_to);
        CREATE TABLE honcho_cache (
            workspace TEXT NOT NULL, peer TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL, at REAL NOT NULL,
            PRIMARY KEY (workspace, peer, kind)
        );
"""


def m002_one_copy_per_turn(db: sqlite3.Connection) -> None:
    """2: a turn's messages are stored once and derived from once; the turns sent to Honcho are remembered.

    A post-turn write replayed after a crash (the core's turn journal) may repeat one that
    happened; a unique index on (workspace, peer, turn_id, role) turns the repeat into a no-op.
    Copies stored before this migration go, what was derived from them pointing at the kept one.
    """
    doubles = db.execute(
        "SELECT m.id, min(kept.id) FROM messages m JOIN messages kept ON kept.workspace = m.workspace"
        " AND kept.peer = m.peer AND kept.turn_id = m.turn_id AND kept.role = m.role AND kept.id < m.id"
        " WHERE m.turn_id IS NOT NULL GROUP BY m.id"
    ).fetchall()
    for double, kept in doubles:
        db.execute("UPDATE observations SET message_id = ? WHERE message_id = ?", (kept, double))
        for prefix in ("message:", "derived:message:"):
            db.execute("UPDATE observations SET source = ? WHERE source = ?", (f"{prefix}{kept}", f"{prefix}{double}"))
            db.execute("UPDATE facts SET source = ? WHERE source = ?", (f"{prefix}{kept}", f"{prefix}{double}"))
        db.execute("DELETE FROM messages WHERE id = ?", (double,))
    db.execute(
        "CREATE UNIQUE INDEX messages_turn ON messages (workspace, peer, turn_id, role) WHERE turn_id IS NOT NULL"
    )
    db.execute("ALTER TABLE messages ADD COLUMN derived_at REAL")  # when the deriver finished with the message
    db.execute(
        "CREATE TABLE honcho_sent (workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,"
        " turn_id TEXT NOT NULL, at REAL NOT NULL, PRIMARY KEY (workspace, peer, turn_id))"
    )


# 3: messages waiting for Honcho (it was down or refused them), kept across processes, sent in id order.
M003_HONCHO_OUTBOX = """
        CREATE TABLE honcho_outbox (
            id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
            turn_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, at REAL NOT NULL,
            claimed_by TEXT, claimed_at REAL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT
        );
        CREATE UNIQUE INDEX honcho_outbox_turn ON honcho_outbox (workspace, peer, turn_id, role);
"""

# 4: facts are triples whose subject is the peer or an entity it mentioned; files made before kept the peer
# as every fact's subject, and an empty subject (never written by Thoth, possible in a hand-made file) means it.
M004_ENTITY_SUBJECTS = """
        UPDATE facts SET subject = peer WHERE subject IS NULL OR trim(subject) = '';
        CREATE INDEX facts_subject ON facts (workspace, peer, subject, predicate, valid_to);
        CREATE INDEX facts_object ON facts (workspace, peer, object);
"""


def m005_ids_never_reused(db: sqlite3.Connection) -> None:
    """5: a deleted message's, observation's or fact's id is never given to a new row (`AUTOINCREMENT`).

    SQLite's plain `INTEGER PRIMARY KEY` hands out the largest id plus one, so deleting `o7` and
    adding another observation named the new one `o7`: a stale id shown to a person (or a fact's
    `derived:message:<id>` source) named another item. Each table is rebuilt with the same columns,
    rows, indexes and triggers; the full-text index keeps its rowids, which do not change.
    """
    for table in ("messages", "observations", "facts"):
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
        if "AUTOINCREMENT" in sql.upper():
            continue
        extras = [
            row[0]
            for row in db.execute(
                "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND type IN ('index', 'trigger') AND sql IS NOT NULL",
                (table,),
            )
        ]
        rebuilt = sql.replace(f"CREATE TABLE {table}", f"CREATE TABLE {table}_rebuilt", 1)
        rebuilt = rebuilt.replace("id INTEGER PRIMARY KEY", "id INTEGER PRIMARY KEY AUTOINCREMENT", 1)
        db.execute(rebuilt)
        db.execute(f"INSERT INTO {table}_rebuilt SELECT * FROM {table}")
        db.execute(f"DROP TABLE {table}")
        db.execute(f"ALTER TABLE {table}_rebuilt RENAME TO {table}")
        for extra in extras:
            db.execute(extra)


# 6: how many derived items the write policy withheld, per message and reason (`thoth_identity.policy`); no text.
M006_WITHHELD = """
        CREATE TABLE withheld (
            id INTEGER PRIMARY KEY AUTOINCREMENT, workspace TEXT NOT NULL, peer TEXT NOT NULL, message_id INTEGER,
            reason TEXT NOT NULL, items INTEGER NOT NULL, at REAL NOT NULL
        );
        CREATE INDEX withheld_peer ON withheld (workspace, peer, message_id);
"""

# 7: the turns waiting for the deriver (`pending.py`): derived in batches, kept across processes; no text.
M007_DERIVE_PENDING = """
        CREATE TABLE derive_pending (
            message_id INTEGER PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, queued_at REAL NOT NULL,
            claimed_by TEXT, claimed_at REAL, attempts INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX derive_pending_peer ON derive_pending (workspace, peer, message_id);
"""

MIGRATIONS: list[Migration] = [
    M001_CREATE_TABLES,
    m002_one_copy_per_turn,
    M003_HONCHO_OUTBOX,
    M004_ENTITY_SUBJECTS,
    m005_ids_never_reused,
    M006_WITHHELD,
    M007_DERIVE_PENDING,
]

# PostgreSQL (`[storage] url`): the schema the SQLite steps make, in one script; its sequences never hand out an
# id twice (SQLite's step 5). Observations are searched with PostgreSQL's full-text search (their stemmed `words`,
# GIN-indexed) instead of FTS5; long texts are indexed by hash (a B-tree entry must fit in a third of a page).
# The corrections audit, a file in each home with SQLite, is a table here, so every worker's corrections are in
# one place.
PG001_CREATE_TABLES = """
        CREATE TABLE peers (
            workspace TEXT NOT NULL, peer TEXT NOT NULL, owner TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (workspace, peer)
        );
        CREATE TABLE messages (
            id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
            session_id TEXT NOT NULL, turn_id TEXT, role TEXT NOT NULL, content TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, derived_at DOUBLE PRECISION
        );
        CREATE INDEX messages_peer ON messages (workspace, peer, thread);
        CREATE UNIQUE INDEX messages_turn ON messages (workspace, peer, turn_id, role) WHERE turn_id IS NOT NULL;
        CREATE TABLE observations (
            id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, owner TEXT NOT NULL,
            content TEXT NOT NULL, kind TEXT NOT NULL, author TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL,
            message_id BIGINT, source TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL,
            words TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED
        );
        CREATE INDEX observations_peer ON observations (workspace, peer, created_at);
        CREATE INDEX observations_content ON observations USING HASH (content);
        CREATE INDEX observations_fts ON observations USING GIN (words);
        CREATE TABLE facts (
            id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, subject TEXT NOT NULL,
            predicate TEXT NOT NULL, object TEXT NOT NULL, confidence DOUBLE PRECISION NOT NULL,
            source TEXT NOT NULL, valid_from DOUBLE PRECISION NOT NULL, valid_to DOUBLE PRECISION
        );
        CREATE INDEX facts_peer ON facts (workspace, peer, predicate, valid_to);
        CREATE INDEX facts_subject ON facts (workspace, peer, subject, predicate, valid_to);
        CREATE INDEX facts_object ON facts USING HASH (object);
        CREATE TABLE honcho_cache (
            workspace TEXT NOT NULL, peer TEXT NOT NULL, kind TEXT NOT NULL, text TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (workspace, peer, kind)
        );
        CREATE TABLE honcho_sent (
            workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL, turn_id TEXT NOT NULL,
            at DOUBLE PRECISION NOT NULL, PRIMARY KEY (workspace, peer, turn_id)
        );
        CREATE TABLE honcho_outbox (
            id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
            turn_id TEXT NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
            claimed_by TEXT, claimed_at DOUBLE PRECISION, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT
        );
        CREATE UNIQUE INDEX honcho_outbox_turn ON honcho_outbox (workspace, peer, turn_id, role);
        CREATE TABLE corrections (
            id BIGSERIAL PRIMARY KEY, at DOUBLE PRECISION NOT NULL, workspace TEXT NOT NULL, peer TEXT NOT NULL,
            actor TEXT NOT NULL, action TEXT NOT NULL, item TEXT NOT NULL
        );
"""

PG002_WITHHELD = """
        CREATE TABLE withheld (
            id BIGSERIAL PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, message_id BIGINT,
            reason TEXT NOT NULL, items INTEGER NOT NULL, at DOUBLE PRECISION NOT NULL
        );
        CREATE INDEX withheld_peer ON withheld (workspace, peer, message_id);
"""

PG003_DERIVE_PENDING = """
        CREATE TABLE derive_pending (
            message_id BIGINT PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL,
            queued_at DOUBLE PRECISION NOT NULL, claimed_by TEXT, claimed_at DOUBLE PRECISION,
            attempts INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX derive_pending_peer ON derive_pending (workspace, peer, message_id);
"""

POSTGRES: list[str] = [PG001_CREATE_TABLES, PG002_WITHHELD, PG003_DERIVE_PENDING]
