"""Full-text search over a peer's observations: FTS5's BM25 in SQLite, `ts_rank` in PostgreSQL.

In SQLite every observation carries an `owner` token indexed by FTS5, so a search is an
intersection inside the index and one peer's rows can never match another peer's query. In
PostgreSQL the rows of the (workspace, peer) are filtered by an ordinary `WHERE` and matched
on their `words` column, `to_tsvector('english', content)` (stemmed like FTS5's porter tokenizer).
Either way a row's `rank` is lower for a better match (FTS5's BM25 is negative; `ts_rank` is negated).
"""

from __future__ import annotations

import hashlib
from typing import Any

from thoth_core.database import Database
from thoth_core.words import STOPWORDS, query_terms

OBSERVATION_COLUMNS = "id, workspace, peer, owner, content, kind, author, confidence, message_id, source, created_at"
__all__ = ["OBSERVATION_COLUMNS", "STOPWORDS", "owner_token", "query_terms", "search_observations"]


def owner_token(workspace: str, peer: str) -> str:
    """The FTS5 token that marks one peer's observations."""
    return "o" + hashlib.sha1(f"{workspace}\x00{peer}".encode()).hexdigest()[:20]


def search_observations(db: Database, workspace: str, peer: str, text: str, *, limit: int) -> list[dict[str, Any]]:
    """The peer's observations most relevant to a message (best match first, weighted by confidence)."""
    terms = query_terms(text)
    if not terms:
        return []
    if db.dialect == "postgres":
        rows = _postgres_matches(db, workspace, peer, terms, limit * 3)
    else:
        rows = _sqlite_matches(db, workspace, peer, terms, limit * 3)
    rows.sort(key=lambda r: r["rank"] * (0.5 + r["confidence"] / 2))
    return rows[:limit]


def _sqlite_matches(db: Database, workspace: str, peer: str, terms: list[str], limit: int) -> list[dict[str, Any]]:
    """Rank inside the FTS5 index first, then read only the winners' rows."""
    match = f'owner : "{owner_token(workspace, peer)}" AND content : (' + " OR ".join(f'"{t}"' for t in terms) + ")"
    ranked = dict(
        db.execute(
            "SELECT rowid, bm25(observations_fts, 0.0, 1.0) AS score FROM observations_fts"
            " WHERE observations_fts MATCH ? ORDER BY score LIMIT ?",
            (match, limit),
        ).fetchall()
    )
    marks = ",".join("?" * len(ranked))
    rows = [
        dict(row)
        for row in db.execute(
            f"SELECT * FROM observations WHERE id IN ({marks}) AND workspace = ? AND peer = ?",
            (*ranked, workspace, peer),
        )
    ]
    for row in rows:
        row["rank"] = ranked[row["id"]]
    return rows


def _postgres_matches(db: Database, workspace: str, peer: str, terms: list[str], limit: int) -> list[dict[str, Any]]:
    """One query: the peer's rows whose stemmed words meet any term's, by `ts_rank` (negated)."""
    query = " | ".join(terms)  # words of letters and digits only: nothing tsquery would read as an operator
    return [
        dict(row)
        for row in db.execute(
            f"SELECT {OBSERVATION_COLUMNS}, -ts_rank(words, q) AS rank FROM observations, to_tsquery('english', ?) q"
            " WHERE workspace = ? AND peer = ? AND words @@ q ORDER BY rank LIMIT ?",
            (query, workspace, peer, limit),
        )
    ]
