"""Ranking shared by every backend: fuse dense and BM25 candidates, then weight by recency.

A backend finds the best candidates per signal over the whole scope (cosine similarity of
the embeddings; BM25 of the indexed text) and hands both lists to `rank`. Fusion is by
default `"score"`: the mean of each signal's min-max normalised score over its candidates, so
a confident signal (a rare word matched, a near-duplicate meaning) outweighs a flat one;
`"rrf"` is reciprocal-rank fusion (each list adds 1/(60 + rank)), which discards how much
better the first candidate was than the tenth (on LoCoMo dev it recalls clearly less).
The dense text of an episode starts with the end of its neighbour context (the previous
turn of its thread), so a short answer ("Yes, last Friday!") carries what it answers.
Recency multiplies the fused score by `1 - w + w * exp(-age / tau)`: with weight w = 0.3 an
old episode keeps at least 70 % of its relevance, so the whole store stays searchable;
tau = 0 (or w = 0) turns recency off.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from .records import Episode, Hit, Query

RRF_K = 60
DAY = 86400.0

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could did do does doing down during each few for from further had has have having he her here
    hers herself him himself his how i if in into is it its itself just me more most my myself no nor not of off on
    once only or other our ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don didn doesn isn wasn ever kind
    likely might may""".split()
)
_WORD = re.compile(r"[\w']+")


def query_terms(text: str) -> list[str]:
    """The content words of a query, lower-cased, stopwords dropped, in order, without repeats."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def fts_match(text: str) -> str | None:
    """An FTS5 / tsquery-neutral OR query of the content words (quoted), or None when none."""
    terms = query_terms(text)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


def date_words(at: float) -> str:
    """How a timestamp is written in indexed text: `7 May 2023 Sunday`."""
    moment = datetime.fromtimestamp(at, UTC)
    return f"{moment.day} {moment.strftime('%B %Y %A')}"


def index_text(episode: Episode) -> str:
    """The text BM25 indexes for an episode's own content."""
    return "\n".join(part for part in (episode.user, episode.assistant, episode.summary) if part)


def embed_text(episode: Episode, max_chars: int = 1000, context_chars: int = 200) -> str:
    """The text the dense embedding is computed from: the end of the neighbour context, then the turn."""
    reply = episode.assistant[: max_chars // 2]
    own = (episode.user + ("\n" + reply if reply else ""))[:max_chars]
    return f"{episode.context[-context_chars:]}\n{own}" if episode.context else own


def recency_factor(age_days: float, tau_days: float, weight: float) -> float:
    """The multiplier for an episode of this age: 1 when recency is off."""
    if tau_days <= 0 or weight <= 0:
        return 1.0
    return 1.0 - weight + weight * math.exp(-max(age_days, 0.0) / tau_days)


def _normalised(scores: dict[Any, float]) -> dict[Any, float]:
    """Scores min-max mapped onto [0, 1] (all 1 when they are equal)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {key: (value - low) / span if span > 0 else 1.0 for key, value in scores.items()}


def rank(
    query: Query,
    dense: Sequence[tuple[Any, float, float]],
    lexical: Sequence[tuple[Any, float, float]],
    load: Callable[[list[Any]], dict[Any, Episode]],
) -> list[Hit]:
    """Fuse best-first (key, score, occurred_at) lists, weight by recency, load and return the top k."""
    dense_rank = {key: i + 1 for i, (key, _, _) in enumerate(dense)}
    lexical_rank = {key: i + 1 for i, (key, _, _) in enumerate(lexical)}
    dense_score = {key: score for key, score, _ in dense}
    lexical_score = {key: score for key, score, _ in lexical}
    occurred = {key: at for key, _, at in [*dense, *lexical]}
    if query.fusion == "rrf":
        fused = {k: sum(1 / (RRF_K + ranks[k]) for ranks in (dense_rank, lexical_rank) if k in ranks) for k in occurred}
    else:
        nd, nl = _normalised(dense_score), _normalised(lexical_score)
        parts = int(bool(dense)) + int(bool(lexical)) or 1
        fused = {k: (nd.get(k, 0.0) + nl.get(k, 0.0)) / parts for k in occurred}
    now = query.now if query.now is not None else (query.as_of if query.as_of is not None else time.time())
    ages = {k: (now - at) / DAY for k, at in occurred.items()}
    factors = {k: recency_factor(ages[k], query.tau_days, query.recency_weight) for k in occurred}
    best = sorted(occurred, key=lambda k: (-fused[k] * factors[k], -occurred[k]))
    hits: list[Hit] = []
    while best and len(hits) < query.k:
        batch, best = best[: query.k - len(hits)], best[query.k - len(hits) :]
        episodes = load(batch)
        for key in batch:
            if key in episodes:
                hits.append(
                    Hit(
                        episodes[key],
                        fused[key] * factors[key],
                        dense_score.get(key),
                        dense_rank.get(key),
                        lexical_score.get(key),
                        lexical_rank.get(key),
                        factors[key],
                        ages[key],
                    )
                )
    return hits


def candidate_count(k: int) -> int:
    """How many candidates each signal contributes before fusion."""
    return max(50, 4 * k)
