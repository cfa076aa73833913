"""The PostgreSQL store's full-text stage: each query word's `ts_rank`, weighted by how rare the word is.

`ts_rank` alone knows no word's rarity: a row holding two common words ranks as high as one
holding two rare ones, and a store of 1M chat turns is full of common words. Each word's
`ts_rank` is weighted by BM25's inverse document frequency instead, from the number of rows
holding it: the share that `ANALYZE` keeps for the table's most common words (`pg_stats`), and
for any other word a count through the full-text index (such a word is rare, so it is cheap).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from itertools import combinations
from typing import Any

from .scoring import PAIRED_ROWS, STOPWORDS, pairable, query_terms, uncommon_words

Row = tuple[int, float, float]  # rowid, full-text score, occurred_at
LEXICAL = (  # the full-text candidates: ranked against the words, among the rows `match` finds
    "SELECT rowid, {rank} AS r, occurred_at FROM thoth_episodes "
    "WHERE {scope} AND tsv @@ {match} ORDER BY r DESC LIMIT %(n)s"
)
PAIRS, ANY_WORD = "to_tsquery('english', %(pairs)s)", "websearch_to_tsquery('english', %(q)s)"
WORD_RANK = "%(idf{i})s * ts_rank(tsv, plainto_tsquery('english', %(word{i})s))"
COMMON_SHARE = 0.2  # a large table leaves out of the match the words held by more than this share of rows
COUNTED_ROWS = 10_000  # a table the planner puts below this, and a word the statistics do not list, are counted to it
WORD_ROWS = """
WITH common AS MATERIALIZED (
    SELECT lexeme, share FROM pg_stats,
        unnest(most_common_elems::text::text[], most_common_elem_freqs) AS m(lexeme, share)
    WHERE schemaname = current_schema() AND tablename = 'thoth_episodes' AND attname = 'tsv'
), asked AS MATERIALIZED (
    SELECT word, position, tsvector_to_array(to_tsvector('english', word)) AS lexemes
    FROM unnest(%(words)s::text[]) WITH ORDINALITY AS w(word, position)
), everything AS (
    SELECT CASE WHEN reltuples >= %(cap)s THEN reltuples
        ELSE (SELECT count(*) FROM (SELECT FROM thoth_episodes LIMIT %(cap)s) AS counted) END AS rows
    FROM pg_class WHERE oid = to_regclass('thoth_episodes')
)
SELECT rows, coalesce(
    (SELECT max(share) FROM common WHERE lexeme = ANY(lexemes)) * rows,
    (SELECT count(*) FROM (
        SELECT FROM thoth_episodes WHERE tsv @@ plainto_tsquery('english', word) LIMIT %(cap)s) AS held)
) FROM everything, asked ORDER BY position
"""


class FullTextSearch:
    """Mixed into `PostgresStore`: the full-text candidates, read on a connection of their own."""

    _rows: Callable[..., list[tuple[Any, ...]]]

    def _lexical(self, text: str, scope: str, params: dict[str, Any]) -> list[Row]:
        """The scope's rows matching the query's words (`matches` says which), by rarity-weighted `ts_rank`."""
        words = [term for term in query_terms(text) if _has_lexeme(term)]
        if not words:
            return []
        counted = self._rows(WORD_ROWS, {"words": words, "cap": COUNTED_ROWS})
        rows, held = int(counted[0][0]), {word: count for word, (_, count) in zip(words, counted, strict=True)}
        params = params | {f"word{i}": word for i, word in enumerate(words)}
        params |= {f"idf{i}": idf(held[word], rows) for i, word in enumerate(words)}
        ranked = " + ".join(WORD_RANK.format(i=i) for i in range(len(words)))
        found: list[tuple[Any, ...]] = []
        large = not params["newest"] and rows >= PAIRED_ROWS
        for match, asked in matches(words, held, rows, params["n"], large=large):
            found = self._rows(LEXICAL.format(rank=ranked, scope=scope, match=match), params | asked)
            if len(found) >= params["n"]:
                break
        return [(r[0], float(r[1]), r[2]) for r in found]


def matches(
    words: list[str], held: dict[str, float], rows: int, wanted: int, *, large: bool
) -> Iterator[tuple[str, dict[str, str]]]:
    """The full-text matches to try in turn, until one finds the candidates wanted; the last holds any word.

    A large table tries, for its uncommon words (`COMMON_SHARE`) and then for all: the rows holding two of
    them, then the rows holding the rarest of them whose rows can fill the `wanted` candidates; a
    row holding only commoner words would rank below those, and ranking the rows of a word in a fifth of
    the table takes seconds.
    """
    tried: list[tuple[str, tuple[str, ...]]] = []
    if large:
        for chosen in (uncommon_words(words, held, COMMON_SHARE * rows), words):
            if pairable(chosen):
                tried.append((PAIRS, tuple(chosen)))
            tried.append((ANY_WORD, tuple(filling(chosen, held, wanted))))
    tried.append((ANY_WORD, tuple(words)))
    for match, chosen in dict.fromkeys(tried):
        yield match, {"pairs": any_two(chosen), "q": " or ".join(chosen)}


def filling(words: Sequence[str], held: dict[str, float], wanted: int) -> list[str]:
    """The rarest words, in query order, whose rows together number at least `wanted` (or all words)."""
    rows, chosen = 0.0, set()
    for word in sorted(words, key=held.__getitem__):
        if rows >= wanted:
            break
        chosen.add(word)
        rows += held[word]
    return [word for word in words if word in chosen]


def idf(held: float, rows: int) -> float:
    """BM25's inverse document frequency of a word that `held` of `rows` rows hold."""
    held = min(float(held or 0), rows)
    return math.log(1 + (rows - held + 0.5) / (held + 0.5))


def _has_lexeme(term: str) -> bool:
    """Whether a word has a part that is no stopword, so PostgreSQL's english configuration keeps it.

    It drops `don't`, `it's` and `now`, and a dropped word would turn its pairs into single words.
    `scoring.STOPWORDS` holds all its stopwords but `now`, and a few more (`didn't` is left out too).
    """
    return any(part not in STOPWORDS and part != "now" and _LETTER.search(part) for part in term.split("'"))


_LETTER = re.compile(r"[^\W_]")


def any_two(terms: Sequence[str]) -> str:
    """A `to_tsquery` text matching rows that hold at least two of the words."""
    quoted = ["'" + term.replace("'", "''") + "'" for term in terms]
    return " | ".join(f"({a} & {b})" for a, b in combinations(quoted, 2))
