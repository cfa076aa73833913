"""Fusion rules: weighted min-max and z-score, RRF's k, and the BM25-confident override."""

from __future__ import annotations

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode, Query
from thoth_episodic.scoring import FUSIONS, Fusion, rank

from thoth_core import ConfigError

NOW = 1_700_000_000.0


def lists(pairs):
    return [(k, s, NOW) for k, s in pairs]


def load(keys):
    return {k: Episode("w", "p", "t", user=k, occurred_at=NOW) for k in keys}


def order(fusion, dense, lexical):
    hits = rank(Query("q", "w", "p", k=5, now=NOW, tau_days=0), lists(dense), lists(lexical), load, fusion)
    return [h.episode.user for h in hits]


DENSE = [("a", 0.80), ("c", 0.45), ("d", 0.42), ("b", 0.40)]
LEXICAL = [("b", 9.0), ("c", 4.0), ("a", 3.8), ("d", 3.5)]


def test_bm25_weight_moves_the_fused_order_towards_bm25():
    assert order(Fusion("score", 0.5), DENSE, LEXICAL)[0] == "a"
    assert order(Fusion("score", 0.8), DENSE, LEXICAL)[0] == "b"
    assert order(Fusion("score", 0.0), DENSE, LEXICAL) == ["a", "c", "d", "b"]
    assert order(Fusion("score", 1.0), DENSE, LEXICAL) == ["b", "c", "a", "d"]


def test_z_scores_reward_an_outlier_more_than_min_max_does():
    dense = [("a", 0.62), ("b", 0.60), ("c", 0.30), ("d", 0.29), ("e", 0.28)]
    lexical = [("b", 5.0), ("a", 1.2), ("c", 1.1), ("d", 1.0), ("e", 0.9)]
    assert Fusion("z").fuse(lists(dense), lists(lexical))["b"] > Fusion("z").fuse(lists(dense), lists(lexical))["a"]
    assert order(Fusion("z"), dense, lexical)[0] == "b"


def test_rrf_k_sets_how_much_the_first_ranks_count():
    dense = [("a", 1.0), ("x", 0.9), ("y", 0.8), ("b", 0.7)]
    lexical = [("b", 1.0), ("x", 0.9), ("y", 0.8), ("a", 0.7)]
    assert order(Fusion("rrf", rrf_k=60), dense, lexical)[0] == "x"  # two seconds beat a first and a fourth
    assert order(Fusion("rrf", rrf_k=1), dense, lexical)[0] in ("a", "b")  # a first rank dominates


def test_a_confident_bm25_top_hit_stays_first():
    dense = [("a", 0.90), ("c", 0.30), ("b", 0.29)]
    lexical = [("b", 9.0), ("a", 2.5), ("c", 2.0)]
    assert order(Fusion("score", 0.5), dense, lexical)[0] == "a"
    assert order(Fusion("score", 0.5, bm25_margin=1.1), dense, lexical)[0] == "b"  # 9.0 >= 1.1 x 2.5
    flat = [("b", 2.6), ("a", 2.5), ("c", 2.0)]
    assert order(Fusion("score", 0.5, bm25_margin=1.1), dense, flat)[0] == "a"  # 2.6 < 1.1 x 2.5: fused order


def test_one_signal_alone_keeps_its_own_order_under_every_rule():
    for fusion in [*FUSIONS.values(), Fusion("z", 0.9)]:
        assert order(fusion, [], LEXICAL) == ["b", "c", "a", "d"]
        assert order(fusion, DENSE, []) == ["a", "c", "d", "b"]


def test_bm25_first_is_the_default_others_are_configurable_and_an_unknown_one_is_refused(make_runtime):
    assert memory_for(make_runtime({"episodic": plugin})).settings.fusion == "bm25-first"
    assert FUSIONS["bm25-first"].bm25_confident([("x", 2.0, NOW), ("y", 2.0, NOW)])  # even on a tie
    runtime = make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"fusion": "score"}}})
    assert memory_for(runtime).settings.fusion == "score"
    with pytest.raises(ConfigError, match=r"plugins\.episodic\.fusion.*bm25-first.*'max'"):
        make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"fusion": "max"}}})


def test_recency_lowers_an_old_candidate_under_z_scores_too():
    ages = {"a": 0, "new": 0, "old": 300, "d": 0}
    dense = [(k, s, NOW - ages[k] * 86400) for k, s in [("a", 0.9), ("new", 0.3), ("old", 0.3), ("d", 0.1)]]
    lexical = [(k, s, NOW - ages[k] * 86400) for k, s in [("a", 9.0), ("new", 3.0), ("old", 3.0), ("d", 1.0)]]
    hits = rank(Query("q", "w", "p", k=4, now=NOW, tau_days=14, recency_weight=0.3), dense, lexical, load, Fusion("z"))
    assert [h.episode.user for h in hits] == ["a", "new", "old", "d"]
    assert all(h.score >= 0 for h in hits)
