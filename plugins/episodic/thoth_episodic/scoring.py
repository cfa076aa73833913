"""Ranking shared by every backend: fuse dense and BM25 candidates, then weight by recency.

A backend finds the best candidates per signal over the whole scope (cosine similarity of
the embeddings; BM25 of the indexed text) and hands both lists to `rank`, which fuses them by
a named `Fusion` rule (`FUSIONS`). The default, `"bm25-first"`, keeps BM25's top hit first
and orders the rest by a weighted sum of each signal's z-scores over its candidates; `"score"`
is the equal-weight mean of min-max normalised scores; `"rrf"` is reciprocal-rank fusion
(each list adds 1/(60 + rank)), which discards how much better the first candidate was.
The dense text of an episode starts with the end of the previous turn of its thread (the first
line of its neighbour context), so a short answer ("Yes, last Friday!") carries what it answers.
Recency multiplies the fused score by `1 - w + w * exp(-age / tau)`: with weight w = 0.3 an
old episode keeps at least 70 % of its relevance, so the whole store stays searchable;
tau = 0 (or w = 0) turns recency off. Then, when the query carries `signals` (`signals.py`:
neighbouring turns, time, names), they re-rank the best `candidate_count(k)` candidates.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from itertools import combinations
from typing import Any

from .records import Episode, Hit, Query
from .signals import adjust

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


# Ranking reads every row matching any word: at 1M episodes a query's four words matched 7,100 rows (34 ms in
# PostgreSQL); the rows holding two of them were about 300 (2 ms) and held the whole top 50 (bench/postgres_recall.py).
# With 12 words, pairs took 33 ms against 70; with 20 they cost more than ranking every match.
PAIRED_ROWS = 100_000  # from this many rows in a store, rows holding two of the query's words are ranked first
PAIRED_TERMS = 12  # for queries of up to this many words (66 pairs); a longer one ranks every row matching any


def query_terms(text: str) -> list[str]:
    """The content words of a query, lower-cased, stopwords dropped, in order, without repeats.

    A backend's BM25 stage scores these words and splits its indexed text the same way (runs of
    letters, digits, `_` and `'`; lower case; a trailing `'s` dropped), so a query word matches the stored one.
    """
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        word = word.strip("'")
        if word.endswith("'s"):
            word = word[:-2]
        if word and word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)


def fts_any(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that hold any of the words."""
    return " OR ".join(f'"{t}"' for t in terms)


def pairable(terms: Sequence[str]) -> bool:
    """Whether a large store ranks the rows holding two of these words first."""
    return 2 <= len(terms) <= PAIRED_TERMS


def large_store_matches(
    terms: Sequence[str], held: Mapping[str, float], rows: float, wanted: int, common_share: float, *, fill: bool
) -> list[tuple[bool, tuple[str, ...]]]:
    """The full-text matches a large store tries in turn, until one finds `wanted` rows: (paired, words).

    For its uncommon words (held by at most `common_share` of the rows), then for all: the rows holding
    two of them, then the rows holding any of them; last, the rows holding any word. With `fill`, "any
    of them" is the rarest of them whose rows can fill the candidates: a row holding only commoner
    words ranks below those when the rank weighs every query word by its rarity (PostgreSQL's), and
    ranking every row of a word in a sixth of 1M rows took 0.9 s there. SQLite's BM25 weighs only the
    matched words, so there it lost up to 4 points of R@10 at 1M (`bench/lexical_scale.py`).
    """
    tried: list[tuple[bool, tuple[str, ...]]] = []
    for chosen in (uncommon_words(terms, held, common_share * rows), list(terms)):
        if pairable(chosen):
            tried.append((True, tuple(chosen)))
        tried.append((False, tuple(filling(chosen, held, wanted) if fill else chosen)))
    tried.append((False, tuple(terms)))
    return list(dict.fromkeys(tried))


def uncommon_words(terms: Sequence[str], held: Mapping[str, float], most: float) -> list[str]:
    """The words held by at most `most` rows, in query order; the two rarest when fewer are."""
    kept = [t for t in terms if held[t] <= most]
    if len(kept) >= 2:
        return kept
    rarest = set(sorted(terms, key=held.__getitem__)[:2])
    return [t for t in terms if t in rarest]


def filling(terms: Sequence[str], held: Mapping[str, float], wanted: int) -> list[str]:
    """The rarest words, in query order, whose rows together number at least `wanted` (or all words)."""
    rows, chosen = 0.0, set()
    for word in sorted(terms, key=held.__getitem__):
        if rows >= wanted:
            break
        chosen.add(word)
        rows += held[word]
    return [t for t in terms if t in chosen]


def fts_pairs(terms: Sequence[str]) -> str:
    """An FTS5 query matching rows that hold at least two of the words (BM25 weighs each word alike, t-1 times)."""
    return " OR ".join(f'("{a}" AND "{b}")' for a, b in combinations(terms, 2))


def date_words(at: float) -> str:
    """How a timestamp is written in indexed text: `7 May 2023 Sunday`."""
    moment = datetime.fromtimestamp(at, UTC)
    return f"{moment.day} {moment.strftime('%B %Y %A')}"


def index_text(episode: Episode) -> str:
    """The text BM25 indexes for an episode's own content: user, assistant and summary, one per line.

    A backend indexes this and the episode's neighbour `context` (`EpisodeStore.set_context`).
    """
    return "\n".join(part for part in (episode.user, episode.assistant, episode.summary) if part)


def embed_text(episode: Episode, max_chars: int = 1000, context_chars: int = 200) -> str:
    """The text the dense embedding is computed from: the end of the previous turn, then the turn.

    Only the context's first line, the previous turn as the episode was written, enters it: the
    next turn's words (its second line, added later) would give an import, a re-embedding or a
    backfill another vector than the turn's own write gave (and ranked worse on LoCoMo dev).
    """
    reply = episode.assistant[: max_chars // 2]
    own = (episode.user + ("\n" + reply if reply else ""))[:max_chars]
    previous = previous_turn(episode.context)
    return f"{previous[-context_chars:]}\n{own}" if previous else own


def previous_turn(context: str) -> str:
    """The previous turn's part of an episode's neighbour context (its first line; see `memory.neighbours`)."""
    return context.split("\n", 1)[0]


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


def _standardised(scores: dict[Any, float]) -> dict[Any, float]:
    """Scores as z-scores over their candidates (all 0 when they are equal)."""
    if not scores:
        return {}
    mean = sum(scores.values()) / len(scores)
    spread = math.sqrt(sum((v - mean) ** 2 for v in scores.values()) / len(scores))
    return {key: (value - mean) / spread if spread > 0 else 0.0 for key, value in scores.items()}


@dataclass(frozen=True)
class Fusion:
    """How dense and BM25 candidates combine: a method, BM25's weight, RRF's k, the BM25-confident margin."""

    method: str = "score"  # "score" (min-max), "z" (z-score) or "rrf" (reciprocal rank)
    lexical_weight: float = 0.5  # BM25's share of the fused score; dense has the rest
    rrf_k: float = RRF_K
    bm25_margin: float = 0.0  # > 0: BM25's top hit goes first when its score is >= margin x the second's (1: always)

    def fuse(
        self, dense: Sequence[tuple[Any, float, float]], lexical: Sequence[tuple[Any, float, float]]
    ) -> dict[Any, float]:
        """The fused score of every candidate of either best-first list (one list alone keeps its order)."""
        weight = self.lexical_weight if dense and lexical else float(bool(lexical))
        keys = {key: None for key, _, _ in [*dense, *lexical]}
        if self.method == "rrf":
            parts = [(1 - weight, {k: 1 / (self.rrf_k + i) for i, (k, _, _) in enumerate(dense, 1)})]
            parts.append((weight, {k: 1 / (self.rrf_k + i) for i, (k, _, _) in enumerate(lexical, 1)}))
            return {k: sum(w * part.get(k, 0.0) for w, part in parts) for k in keys}
        scale = _standardised if self.method == "z" else _normalised
        nd, nl = scale({k: s for k, s, _ in dense}), scale({k: s for k, s, _ in lexical})
        floor_d, floor_l = min(nd.values(), default=0.0), min(nl.values(), default=0.0)
        fused = {k: (1 - weight) * nd.get(k, floor_d) + weight * nl.get(k, floor_l) for k in keys}
        if self.method != "z":
            return fused
        low = min(fused.values(), default=0.0)  # z-scores go negative: shift so recency's factor lowers old ones
        return {k: value - low for k, value in fused.items()}

    def bm25_confident(self, lexical: Sequence[tuple[Any, float, float]]) -> bool:
        """Whether BM25's top score stands far enough above its second to be kept first."""
        if self.bm25_margin <= 0 or not lexical:
            return False
        return len(lexical) == 1 or lexical[0][1] >= self.bm25_margin * max(lexical[1][1], 1e-12)


# `[plugins.episodic] fusion` names. "bm25-first" (the default) never loses BM25's top hit and orders
# the rest by z-scores with BM25 weighted 0.7: on LoCoMo dev, with that weight chosen by leave-one-
# conversation-out cross-validation, every held-out conversation beat BM25 alone at R@1 (equal to BM25
# without recency), MRR and R@10 (bench/locomo_recall.py prints the folds). "score" and "rrf" are the
# earlier rules; "score" lost the top hit to BM25 (held-out R@1 30.5 vs 38.7).
FUSIONS: dict[str, Fusion] = {
    "bm25-first": Fusion("z", lexical_weight=0.7, bm25_margin=1.0),
    "score": Fusion(),
    "rrf": Fusion("rrf"),
}


def rank(
    query: Query,
    dense: Sequence[tuple[Any, float, float]],
    lexical: Sequence[tuple[Any, float, float]],
    load: Callable[[list[Any]], dict[Any, Episode]],
    fusion: Fusion | None = None,
) -> list[Hit]:
    """Fuse best-first (key, score, occurred_at) lists, weight by recency, load and return the top k.

    Every backend's `search` ends here, so all of them rank alike (the contract checks exact ranks
    and recency values).

    Args:
        query: the recall request; `k`, `fusion`, `now`/`as_of`, `tau_days`, `recency_weight`
            and `signals` are read.
        dense: the best `candidate_count(query.k)` by cosine similarity, best first; empty
            without a query vector.
        lexical: the best `candidate_count(query.k)` by BM25 (higher is better), best first.
        load: gives the `Episode` of each key asked for (a key it leaves out is dropped).
        fusion: a rule other than `FUSIONS[query.fusion]`.

    Returns:
        At most `query.k` hits, best first; each hit's `dense_rank`/`bm25_rank` is its 1-based
        place in that list (None when absent) and `recency` is `recency_factor` of its age in
        days from `query.now`, else `query.as_of`, else the clock. Equal scores go newest first.
    """
    fusion = fusion or FUSIONS[query.fusion]
    dense_rank = {key: i + 1 for i, (key, _, _) in enumerate(dense)}
    lexical_rank = {key: i + 1 for i, (key, _, _) in enumerate(lexical)}
    dense_score = {key: score for key, score, _ in dense}
    lexical_score = {key: score for key, score, _ in lexical}
    occurred = {key: at for key, _, at in [*dense, *lexical]}
    fused = fusion.fuse(dense, lexical)
    now = query.now if query.now is not None else (query.as_of if query.as_of is not None else time.time())
    ages = {k: (now - at) / DAY for k, at in occurred.items()}
    factors = {k: recency_factor(ages[k], query.tau_days, query.recency_weight) for k in occurred}
    scored = {k: fused[k] * factors[k] for k in occurred}
    loaded: dict[Any, Episode] = {}
    tried: set[Any] = set()
    best = sorted(occurred, key=lambda k: (-scored[k], -occurred[k]))
    if query.signals is not None and query.signals.active and best:
        head = best[: candidate_count(query.k)]  # as many as one signal contributes; the rest keep their order
        loaded, tried = load(head), set(head)  # one read: the signals look at their text and thread
        scored.update(adjust({k: scored[k] for k in head}, loaded, query.text, query.signals))
        best = sorted(head, key=lambda k: (-scored[k], -occurred[k])) + best[len(head) :]
    if fusion.bm25_confident(lexical):
        best.remove(lexical[0][0])
        best.insert(0, lexical[0][0])
    hits: list[Hit] = []
    while best and len(hits) < query.k:
        batch, best = best[: query.k - len(hits)], best[query.k - len(hits) :]
        fresh = [k for k in batch if k not in tried]
        episodes = {k: loaded[k] for k in batch if k in loaded} | (load(fresh) if fresh else {})
        for key in batch:
            if key in episodes:
                hits.append(
                    Hit(
                        episodes[key],
                        scored[key],
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
    """How many candidates each signal contributes before fusion: 50, or 4 x k when that is more.

    A backend gives `rank` this many from each signal (fewer when fewer match).
    """
    return max(50, 4 * k)
