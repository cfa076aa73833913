"""Full-text search over a peer's observations: FTS5's BM25 in SQLite, `ts_rank` in PostgreSQL.

In SQLite every observation carries an `owner` token indexed by FTS5, so a search is an
intersection inside the index and one peer's rows can never match another peer's query. In
PostgreSQL the rows of the (workspace, peer) are filtered by an ordinary `WHERE` and matched
on their `words` column, `to_tsvector('english', content)` (stemmed like FTS5's porter tokenizer).
Either way a row's `rank` is lower for a better match (FTS5's BM25 is negative; `ts_rank` is negated).
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from typing import Any

from thoth_core.database import Database

OBSERVATION_COLUMNS = "id, workspace, peer, owner, content, kind, author, confidence, message_id, source, created_at"
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


def word_stems(text: str) -> set[str]:
    """The Porter stems of a text's content words, as FTS5's porter tokenizer stems observations ("hike", "hiking")."""
    return {_stem(word) for word in query_terms(text, limit=64)}


@lru_cache(maxsize=4096)
def _stem(word: str) -> str:
    from snowballstemmer import stemmer  # its package loads every language's stemmer: 10 ms, first use only

    return str(stemmer("porter").stemWord(word))  # a stemmer per word: one keeps state while it stems


def query_terms(text: str, limit: int = 16) -> list[str]:
    """Distinct content words of a message, for a full-text OR query."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:limit]


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
