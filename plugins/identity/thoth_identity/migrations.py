"""The identity store's schema, applied in order on open (tracked by `PRAGMA user_version`)."""

from __future__ import annotations

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

MIGRATIONS: list[Migration] = [M001_CREATE_TABLES]
