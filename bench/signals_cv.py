"""Post-fusion signals (neighbours, time, names, speakers) compared on captured LoCoMo candidates, by cross-validation.

On the candidates `locomo_recall.py` recorded, the configured fusion rule is kept and each
combination of signal weights of a small grid re-ranks them. Leave-one-conversation-out: per fold
the weights are chosen on the other conversations (best R@5 + R@10 + MRR) and scored on the held-out
one, next to fusion alone. Ablations: the configured weights with each signal removed, per conversation
and per category (no choosing involved).
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, replace
from typing import Any

from fusion_cv import Question, _pool, mean, measures, ranked
from thoth_episodic.scoring import Fusion
from thoth_episodic.signals import Signals

CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
NEIGHBOUR = (0.0, 0.15, 0.3, 0.5)
TEMPORAL = (0.0, 0.5, 1.0, 2.0)
ENTITY = (0.0, 0.15, 0.3, 0.5)
SPEAKER = (0.0, 0.5, 0.75, 1.0)


def grid(configured: Signals) -> dict[str, Signals]:
    """Every combination of the weights (the neighbour window as configured)."""
    return {
        f"neighbour={n} temporal={t} entity={e} speaker={s}": replace(
            configured, neighbour_weight=n, temporal_weight=t, entity_weight=e, speaker_weight=s
        )
        for n, t, e, s in itertools.product(NEIGHBOUR, TEMPORAL, ENTITY, SPEAKER)
    }


def objective(scores: dict[str, float]) -> float:
    """What a fold maximises on its training conversations: R@5 + R@10 (as fractions) + MRR."""
    return scores["R@5"] / 100 + scores["R@10"] / 100 + scores["MRR"]


def ablations(configured: Signals) -> dict[str, Signals | None]:
    """The configured signals, each removed in turn, all removed."""
    return {
        "configured": configured,
        "without_neighbours": replace(configured, neighbour_weight=0.0),
        "without_temporal": replace(configured, temporal_weight=0.0),
        "without_entity": replace(configured, entity_weight=0.0),
        "without_speaker": replace(configured, speaker_weight=0.0),
        "fusion_alone": None,
    }


def breakdown(rows: list[dict[str, float]], questions: list[Question]) -> dict[str, Any]:
    """Means overall, per conversation and per category."""
    out: dict[str, Any] = {"all": mean(rows)}
    for conversation in sorted({q.conversation for q in questions}):
        out[conversation] = mean([r for r, q in zip(rows, questions, strict=True) if q.conversation == conversation])
    for category, name in CATEGORY_NAMES.items():
        out[f"{category} {name}"] = mean([r for r, q in zip(rows, questions, strict=True) if q.category == category])
    return out


def report(questions: list[Question], fusion: Fusion, configured: Signals) -> dict[str, Any]:
    """Ablations of the configured signals and the leave-one-conversation-out folds over the grid."""
    rules = grid(configured)
    table = {name: [measures(ranked(q, fusion, signals=s), q.evidence) for q in questions] for name, s in rules.items()}
    table["fusion_alone"] = [measures(ranked(q, fusion), q.evidence) for q in questions]
    folds, held_out_rows = [], [{} for _ in questions]
    for held in sorted({q.conversation for q in questions}):
        train = [i for i, q in enumerate(questions) if q.conversation != held]
        test = [i for i, q in enumerate(questions) if q.conversation == held]
        trained = {name: mean([table[name][i] for i in train]) for name in rules}
        chosen = max(trained, key=lambda n: objective(trained[n]))
        held_out = {key: mean([table[key][i] for i in test]) for key in (chosen, "fusion_alone")}
        for i in test:
            held_out_rows[i] = table[chosen][i]
        folds.append(
            {
                "held_out": held,
                "chosen": chosen,
                "train": trained[chosen],
                "held_out_scores": {"chosen": held_out[chosen], "fusion_alone": held_out["fusion_alone"]},
            }
        )
    pooled = {
        key: _pool([(f["held_out_scores"][key], f["held_out_scores"][key]["questions"]) for f in folds])
        for key in ("chosen", "fusion_alone")
    }
    return {
        "configured_signals": asdict(configured),
        "ablations": {
            name: breakdown([measures(ranked(q, fusion, signals=s), q.evidence) for q in questions], questions)
            for name, s in ablations(configured).items()
        },
        "cross_validation": {
            "objective": "R@5 + R@10 + MRR",
            "folds": folds,
            "pooled_held_out": pooled,
            "held_out_by_category": breakdown(held_out_rows, questions),
        },
    }
