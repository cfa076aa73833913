"""Fusion, recency and query handling, on plain lists."""

from __future__ import annotations

import math

import pytest
from thoth_episodic.records import Episode, Query
from thoth_episodic.scoring import date_words, embed_text, fts_any, query_terms, rank, recency_factor

NOW = 1_700_000_000.0
DAY = 86400.0


def loader(ages: dict[str, float]):
    def load(keys):
        return {k: Episode("w", "p", "t", user=k, occurred_at=NOW - ages[k] * DAY) for k in keys if k in ages}

    return load


def at(pairs, ages):
    """(key, score) pairs with each key's time."""
    return [(k, s, NOW - ages.get(k, 0) * DAY) for k, s in pairs]


def test_score_fusion_rewards_a_confident_signal_that_rrf_flattens():
    dense = [("a", 0.90), ("b", 0.31), ("c", 0.30), ("d", 0.2), ("e", 0.1)]
    lexical = [("b", 12.0), ("c", 11.9), ("a", 11.8), ("d", 3.0), ("e", 2.0)]
    ages = dict.fromkeys("abcde", 0)
    by_score = rank(
        Query("q", "w", "p", k=3, now=NOW, tau_days=0, fusion="score"), at(dense, ages), at(lexical, ages), loader(ages)
    )
    by_rrf = rank(
        Query("q", "w", "p", k=3, now=NOW, tau_days=0, fusion="rrf"), at(dense, ages), at(lexical, ages), loader(ages)
    )
    assert by_score[0].episode.user == "a"  # far ahead on meaning, a near tie on words
    assert by_rrf[0].episode.user == "b"  # ranks 2 + 1 beat ranks 1 + 3
    assert by_score[0].dense_rank == 1 and by_score[0].bm25_rank == 3 and by_score[0].bm25 == 11.8


def test_recency_multiplies_and_zero_tau_turns_it_off():
    assert recency_factor(0, 14, 0.3) == 1.0
    assert recency_factor(14, 14, 0.3) == pytest.approx(0.7 + 0.3 / math.e)
    assert recency_factor(1000, 14, 0.3) == pytest.approx(0.7)
    assert recency_factor(1000, 0, 0.3) == recency_factor(1000, 14, 0) == 1.0
    ages = {"old": 100, "new": 1}
    hits = rank(
        Query("q", "w", "p", k=2, now=NOW, tau_days=14), at([("old", 0.9), ("new", 0.9)], ages), [], loader(ages)
    )
    assert [h.episode.user for h in hits] == ["new", "old"] and hits[1].age_days == pytest.approx(100)


def test_deleted_candidates_are_skipped():
    hits = rank(Query("q", "w", "p", k=5, now=NOW), at([("gone", 0.9), ("here", 0.5)], {}), [], loader({"here": 1}))
    assert [h.episode.user for h in hits] == ["here"]


def test_query_terms_drop_stopwords_and_possessives():
    assert query_terms("When did Caroline's sister move to Paris in 2022?") == [
        "caroline",
        "sister",
        "move",
        "paris",
        "2022",
    ]
    assert query_terms("What is it?") == []
    assert fts_any(query_terms('the "weird" quote')) == '"weird" OR "quote"'


def test_dates_and_dense_text():
    assert date_words(1683504000) == "8 May 2023 Monday"
    episode = Episode(
        "w", "p", "t", user="Yes, last Friday!", assistant="Nice.", context="Did you finish the marathon?"
    )
    assert embed_text(episode) == "Did you finish the marathon?\nYes, last Friday!\nNice."
