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
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

from .scoring import PAIRED_ROWS, STOPWORDS, large_store_matches, query_terms

Row = tuple[int, float, float]  # rowid, full-text score, occurred_at
LEXICAL = (  # the full-text candidates: ranked against the words, among the rows `match` finds
    "SELECT rowid, {rank} AS r, occurred_at FROM thoth_episodes "
    "WHERE {scope} AND tsv @@ {match} ORDER BY r DESC LIMIT %(n)s"
)
PAIRS, ANY_WORD = "to_tsquery('english', %(pairs)s)", "websearch_to_tsquery('english', %(q)s)"
WORD_RANK = "%(idf{i})s * ts_rank(tsv, plainto_tsquery('english', %(word{i})s))"
# LoCoMo questions over 1M rows of conversation text (bench/lexical_scale.py --storage-url), conv-26 / 41 / 48:
# R@10 of the evidence among the 50 candidates 41.2 / 47.1 / 45.4 with every word weighted alike (ts_rank alone),
# 59.3 / 63.8 / 63.3 weighted by rarity. Leaving the words held by over 5 % of the rows out of the match kept that
# (59.3 / 64.1 / 63.9; R@50 within 0.6) and took the median from 20-59 ms to 9-13 ms, p90 from 198-378 to 34-48 ms;
# leave-one-conversation-out chose 5 % on each fold (of 5, 10 and 20 %).
COMMON_SHARE = 0.05  # a large table leaves out of the match the words held by more than this share of rows
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
        """The scope's rows matching the query's words (in a large table: `large_store_matches`), ranked by
        each word's `ts_rank` weighted by its rarity."""
        words = [term for term in query_terms(text) if _has_lexeme(term)]
        if not words:
            return []
        counted = self._rows(WORD_ROWS, {"words": words, "cap": COUNTED_ROWS})
        rows, held = int(counted[0][0]), {word: count for word, (_, count) in zip(words, counted, strict=True)}
        params = params | {f"word{i}": word for i, word in enumerate(words)}
        params |= {f"idf{i}": idf(held[word], rows) for i, word in enumerate(words)}
        ranked = " + ".join(WORD_RANK.format(i=i) for i in range(len(words)))
        found: list[tuple[Any, ...]] = []
        tried = [(False, tuple(words))]
        if not params["newest"] and rows >= PAIRED_ROWS:
            tried = large_store_matches(words, held, rows, params["n"], COMMON_SHARE, fill=True)
        for paired, chosen in tried:
            match, asked = (PAIRS, {"pairs": any_two(chosen)}) if paired else (ANY_WORD, {"q": " or ".join(chosen)})
            found = self._rows(LEXICAL.format(rank=ranked, scope=scope, match=match), params | asked)
            if len(found) >= params["n"]:
                break
        return [(r[0], float(r[1]), r[2]) for r in found]


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
