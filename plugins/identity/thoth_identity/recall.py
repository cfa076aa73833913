"""What the identity layer recalls for a query: the peer's facts and observations, by meaning and by words.

The candidates are every current fact, the observations full-text search finds and the newest
`SCAN` observations; the runtime's `meaning` ranks them (cosine and shared stems, fused). Derived facts
and observations come back only when the write policy shows them (`policy`), as in the block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import RecallHit

from .policy import visible
from .render import fact_label
from .store import IdentityStore

if TYPE_CHECKING:
    from thoth_core.meaning import Meaning

SCAN = 100  # the newest observations searched by meaning beyond those full-text search finds (each cold: ~5 ms)


def recall_items(
    store: IdentityStore, meaning: Meaning, *, workspace: str, peer: str, query: str, limit: int
) -> list[RecallHit]:
    """The peer's facts and observations matching the query by meaning or words, best first."""
    found = {row["id"]: row for row in store.search_observations(workspace, peer, query, limit=limit * 3)}
    for row in store.recent_observations(workspace, peer, limit=SCAN):
        found.setdefault(row["id"], row)
    facts, observations = visible(
        store, workspace, peer, facts=store.current_facts(workspace, peer), observations=found.values()
    )
    items: list[tuple[str, dict[str, Any]]] = [("fact", f) for f in facts] + [("observation", o) for o in observations]
    texts = [fact_label(row, peer) if kind == "fact" else row["content"] for kind, row in items]
    hits: list[RecallHit] = []
    for match in meaning.rank(query, texts, limit=limit):
        kind, row = items[match.index]
        hits.append(
            {
                "layer": "identity",
                "kind": kind,
                "id": f"{kind[0]}{row['id']}",  # the record ids `/correct` and `memory_record` know: f12, o34
                "text": texts[match.index],
                "score": match.score,
                "why": dict(match.why, confidence=row["confidence"])
                | ({"fact": row["predicate"]} if kind == "fact" else {"author": row["author"]}),
                "at": row["valid_from"] if kind == "fact" else row["created_at"],
            }
        )
    return hits
