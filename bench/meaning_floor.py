"""How the cosine floor of recall by meaning (`thoth_core.meaning.FLOOR`) splits evidence from the rest; prints JSON.

    python bench/meaning_floor.py --data ../shared/data/locomo/locomo-dev.json

For every LoCoMo question with evidence, the cosine (the runtime's embedder, all-MiniLM-L6-v2) of the
question to each turn of its conversation: per conversation and floor, the share of evidence turns at
or above the floor (`kept_evidence`) and of the other turns (`kept_other`). The other turns of one
conversation are about the same two people, so `kept_other` is high: a layer's items about one peer are too.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from locomo_recall import evidence_ids, turns_of
from thoth_episodic.embedder import MiniLMEmbedder

FLOORS = (0.2, 0.25, 0.3, 0.35, 0.4)


def cosines(embedder: MiniLMEmbedder, sample: dict) -> tuple[np.ndarray, np.ndarray]:
    """The question-to-turn cosines of one conversation: (evidence, other)."""
    turns = [turn for _, turn in turns_of(sample)]
    vectors = embedder.embed([f"{t['speaker']}: {t['text']}" for t in turns])
    asked = [q for q in sample["qa"] if evidence_ids(q.get("evidence", []))]
    scores = embedder.embed([q["question"] for q in asked]) @ vectors.T
    evidence, other = [], []
    for row, question in enumerate(asked):
        wanted = set(evidence_ids(question["evidence"]))
        for column, turn in enumerate(turns):
            (evidence if turn["dia_id"] in wanted else other).append(scores[row, column])
    return np.array(evidence), np.array(other)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    args = parser.parse_args()
    embedder = MiniLMEmbedder()
    report = {}
    for sample in json.loads(args.data.read_text(encoding="utf-8")):
        evidence, other = cosines(embedder, sample)
        report[sample["sample_id"]] = {
            "evidence_median": round(float(np.median(evidence)), 3),
            "other_median": round(float(np.median(other)), 3),
            "floors": {
                str(f): {
                    "kept_evidence": round(float((evidence >= f).mean()), 3),
                    "kept_other": round(float((other >= f).mean()), 3),
                }
                for f in FLOORS
            },
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
