"""Fusion rules of the episodic layer compared on captured LoCoMo candidates, by cross-validation.

`locomo_recall.py` records, for every question, the dense and BM25 candidate lists the store
handed to `scoring.rank`; this module re-ranks them under each rule of a grid (no re-embedding),
reports hybrid vs BM25-only vs dense-only and each signal removed, and runs leave-one-conversation-out
cross-validation: on each fold the rule is chosen on the other conversations (best MRR among rules
whose R@10 is not below BM25-only's there) and scored on the held-out one.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from thoth_episodic.records import Episode, Query
from thoth_episodic.scoring import FUSIONS, Fusion, candidate_count, rank
from thoth_episodic.signals import Signals

CUTOFFS = (1, 5, 10)
# Each signal's list is cut to what a recall of k <= 10 gets in production (the bench itself asks for more).
CANDIDATES = candidate_count(max(CUTOFFS))


@dataclass
class Question:
    """One LoCoMo question with the candidates recall saw for it."""

    conversation: str
    query: Query
    dense: list[tuple[Any, float, float]]
    lexical: list[tuple[Any, float, float]]
    episodes: dict[Any, Episode]
    evidence: list[str]
    category: int = 0


def grid() -> dict[str, Fusion]:
    """The candidate rules: min-max and z-score weights (each without and with the BM25-confident
    override; margin 1.0 keeps BM25's top hit first always), and RRF's k and weight."""
    rules: dict[str, Fusion] = {"score": FUSIONS["score"], "rrf": FUSIONS["rrf"]}
    for weight in (0.5, 0.6, 0.7, 0.8, 0.9):
        for margin in (0.0, 1.0, 1.05, 1.1, 1.25, 1.5):
            suffix = f" margin={margin}" if margin else ""
            rules[f"minmax w={weight}{suffix}"] = Fusion("score", weight, bm25_margin=margin)
            rules[f"z w={weight}{suffix}"] = Fusion("z", weight, bm25_margin=margin)
    for k in (1, 5, 10, 20, 40, 60):
        for weight in (0.5, 0.65, 0.8):
            rules[f"rrf k={k} w={weight}"] = Fusion("rrf", weight, rrf_k=k)
    return rules


def ranked(
    question: Question,
    fusion: Fusion,
    *,
    dense: bool = True,
    lexical: bool = True,
    recency: bool = True,
    signals: Signals | None = None,
) -> list[str]:
    """The question's dialog ids best first under one rule, with signals optionally removed.

    `signals` None: fusion alone (the post-fusion signals off); the captured query's are not used."""
    query = replace(question.query, signals=signals, k=max(CUTOFFS))  # as production's k=10 recall does
    query = query if recency else replace(query, recency_weight=0.0)
    hits = rank(
        query,
        question.dense[:CANDIDATES] if dense else [],
        question.lexical[:CANDIDATES] if lexical else [],
        lambda keys: {k: question.episodes[k] for k in keys if k in question.episodes},
        fusion,
    )
    return [h.episode.turn_id.split("/", 1)[1] for h in hits]


def measures(order: list[str], evidence: list[str]) -> dict[str, float]:
    """R@1, R@5, R@10 (fraction of evidence found) and reciprocal rank of one question."""
    out = {f"R@{k}": len(set(order[:k]) & set(evidence)) / len(evidence) for k in CUTOFFS}
    first = next((i for i, dia in enumerate(order, 1) if dia in evidence), None)
    return out | {"MRR": 1 / first if first else 0.0}


def evaluate(questions: list[Question], rank_one: Callable[[Question], list[str]]) -> dict[str, float]:
    """Mean measures over questions: R@k in percent, MRR as a fraction."""
    return mean([measures(rank_one(q), q.evidence) for q in questions])


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    """Mean of per-question measures: R@k in percent, MRR as a fraction."""
    if not rows:
        return {}
    out = {key: statistics.fmean(r[key] for r in rows) for key in rows[0]}
    return {k: round(v, 4) if k == "MRR" else round(100 * v, 2) for k, v in out.items()} | {"questions": len(rows)}


def candidate_ceiling(questions: list[Question], n: int = CANDIDATES) -> dict[str, float]:
    """R@10 (percent) a perfect re-ranking of each question's first `n` candidates per signal would reach."""
    found = []
    for q in questions:
        keys = {key for key, _, _ in [*q.dense[:n], *q.lexical[:n]]}
        held = {q.episodes[key].turn_id.split("/", 1)[1] for key in keys if key in q.episodes}
        found.append(min(len(held & set(q.evidence)), 10) / len(q.evidence))
    return {"R@10": round(100 * statistics.fmean(found), 2), "questions": len(found)} if found else {}


def signals(questions: list[Question], fusion: Fusion) -> dict[str, dict[str, float]]:
    """Hybrid vs BM25-only vs dense-only, and each without recency (every signal removed in turn)."""
    return {
        "hybrid": evaluate(questions, lambda q: ranked(q, fusion)),
        "bm25_only": evaluate(questions, lambda q: ranked(q, fusion, dense=False)),
        "dense_only": evaluate(questions, lambda q: ranked(q, fusion, lexical=False)),
        "hybrid_without_recency": evaluate(questions, lambda q: ranked(q, fusion, recency=False)),
        "bm25_only_without_recency": evaluate(questions, lambda q: ranked(q, fusion, dense=False, recency=False)),
        "dense_only_without_recency": evaluate(questions, lambda q: ranked(q, fusion, lexical=False, recency=False)),
    }


# How a fold picks its rule on the training conversations, among rules whose R@10 is not below
# BM25-only's there: by MRR alone, or by R@1 and MRR together (the two measures the rule must win).
OBJECTIVES: dict[str, Callable[[dict[str, float]], float]] = {
    "mrr": lambda s: s["MRR"] + s["R@1"] / 1e6,
    "r1_plus_mrr": lambda s: s["R@1"] / 100 + s["MRR"],
    "r1": lambda s: s["R@1"] + s["MRR"] / 1e6,
}
BASELINES = ("score", "bm25_only", "bm25_only_without_recency", "dense_only")


def cross_validate(
    questions: list[Question], rules: dict[str, Fusion], objective: str, family: str = "whole grid"
) -> dict[str, Any]:
    """Leave-one-conversation-out: per fold the rule chosen on the others, its training and held-out scores."""
    table = {name: [measures(ranked(q, f), q.evidence) for q in questions] for name, f in rules.items()}
    table["score"] = [measures(ranked(q, FUSIONS["score"]), q.evidence) for q in questions]
    table["bm25_only"] = [measures(ranked(q, FUSIONS["score"], dense=False), q.evidence) for q in questions]
    table["dense_only"] = [measures(ranked(q, FUSIONS["score"], lexical=False), q.evidence) for q in questions]
    table["bm25_only_without_recency"] = [
        measures(ranked(q, FUSIONS["score"], dense=False, recency=False), q.evidence) for q in questions
    ]
    conversations = sorted({q.conversation for q in questions})
    folds = []
    for held in conversations:
        train = [i for i, q in enumerate(questions) if q.conversation != held]
        test = [i for i, q in enumerate(questions) if q.conversation == held]
        trained = {name: mean([table[name][i] for i in train]) for name in rules}
        floor = mean([table["bm25_only"][i] for i in train])["R@10"]
        allowed = {n: s for n, s in trained.items() if s["R@10"] >= floor} or trained
        name = max(allowed, key=lambda n: OBJECTIVES[objective](allowed[n]))
        held_out = {key: mean([table[key][i] for i in test]) for key in (name, *BASELINES)}
        folds.append(
            {
                "held_out": held,
                "chosen": name,
                "rule": asdict(rules[name]),
                "train": trained[name],
                "held_out_scores": {"chosen": held_out[name]} | {k: held_out[k] for k in BASELINES},
            }
        )
    pooled = {
        key: _pool([(f["held_out_scores"][key], f["held_out_scores"][key]["questions"]) for f in folds])
        for key in folds[0]["held_out_scores"]
    }
    return {"family": family, "objective": objective, "folds": folds, "pooled_held_out": pooled}


def _pool(parts: list[tuple[dict[str, float], int]]) -> dict[str, float]:
    """Question-weighted mean of per-fold scores."""
    total = sum(n for _, n in parts)
    keys = [k for k in parts[0][0] if k != "questions"]
    return {k: round(sum(s[k] * n for s, n in parts) / total, 4) for k in keys} | {"questions": total}


def report(questions: list[Question], fusion_name: str) -> dict[str, Any]:
    """Signals and ablations of the configured rule, every rule on all of dev (for reference), and the folds."""
    rules = grid()
    bm25_first = {name: fusion for name, fusion in rules.items() if fusion.bm25_margin == 1.0}
    return {
        "configured_fusion": fusion_name,
        "configured_rule": asdict(FUSIONS[fusion_name]),
        "signals": signals(questions, FUSIONS[fusion_name]),
        "grid_on_all_dev_not_for_choosing": {
            name: evaluate(questions, lambda q, f=fusion: ranked(q, f)) for name, fusion in rules.items()
        },
        "cross_validation": [cross_validate(questions, rules, objective) for objective in OBJECTIVES]
        + [cross_validate(questions, bm25_first, "mrr", "BM25's top hit first (margin 1.0), weights tuned")],
    }
