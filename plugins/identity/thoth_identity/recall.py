"""What the identity layer recalls for a query: the peer's facts that match it, then observations (BM25).

Derived facts and observations come back only when the write policy shows them (`policy`), as in the block."""

from __future__ import annotations

from thoth_core import RecallHit

from .policy import visible
from .render import fact_label
from .search import word_stems
from .store import IdentityStore


def recall_items(store: IdentityStore, *, workspace: str, peer: str, query: str, limit: int) -> list[RecallHit]:
    """The peer's current facts sharing a word's stem with the query, then its matching observations, best first."""
    stems = word_stems(query)
    facts = [
        fact
        for fact in visible(store, workspace, peer, facts=store.current_facts(workspace, peer))[0]
        if stems & word_stems(fact_label(fact, peer).replace("_", " "))
    ]
    items: list[RecallHit] = [
        {
            "layer": "identity",
            "kind": "fact",
            "id": f"fact:{fact['id']}",
            "text": fact_label(fact, peer),
            "score": 1.0,
            "why": {"fact": fact["predicate"], "confidence": fact["confidence"]},
            "at": fact["valid_from"],
        }
        for fact in sorted(facts, key=lambda f: -f["valid_from"])
    ]
    found = store.search_observations(workspace, peer, query, limit=limit)
    for row in visible(store, workspace, peer, observations=found)[1]:
        bm25 = float(f"{-float(row['rank']):.3g}")  # FTS5's rank is negative, and tiny in a small index
        items.append(
            {
                "layer": "identity",
                "kind": "observation",
                "id": f"observation:{row['id']}",
                "text": row["content"],
                "score": bm25,
                "why": {"bm25": bm25, "confidence": row["confidence"], "author": row["author"]},
                "at": row["created_at"],
            }
        )
    return items[:limit]
