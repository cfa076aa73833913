"""A text's content words and their Porter stems, so "hike" meets "hiking" wherever a layer matches words."""

from __future__ import annotations

import re
from functools import lru_cache

_WORD = re.compile(r"[^\W_]{3,}", re.UNICODE)
STOPWORDS = frozenset(
    "the and for are but not you your yours with this that what when where which who whom why how was were "
    "have has had can could would should will shall may might must our ours they them their there here from "
    "into onto about over under than then its it's just also very much many some any all each more most "
    "please tell know want need like does did doing done been being get got let make made say said".split()
)


def query_terms(text: str, limit: int = 16) -> list[str]:
    """Distinct content words of a text (lower case, three letters or more, no stopword), first `limit`."""
    seen: dict[str, None] = {}
    for word in _WORD.findall(text.lower()):
        if word not in STOPWORDS:
            seen.setdefault(word, None)
    return list(seen)[:limit]


def word_stems(text: str) -> set[str]:
    """The Porter stems of a text's content words, as FTS5's porter tokenizer stems ("hike", "hiking": "hike")."""
    return {stem(word) for word in query_terms(text.replace("_", " "), limit=64)}


@lru_cache(maxsize=4096)
def stem(word: str) -> str:
    """One word's Porter stem."""
    from snowballstemmer import stemmer  # its package loads every language's stemmer: 10 ms, first use only

    return str(stemmer("porter").stemWord(word))  # a stemmer per word: one keeps state while it stems
