"""Candidate generation on LoCoMo: the R@10 ceiling per category of first-stage variants; prints JSON.

    python bench/locomo_candidates.py --data ../shared/data/locomo/locomo-dev.json [--n 50]

Offline, outside the plugin: each turn embedded as the episodic layer embeds it (the previous turn's
line, then the turn; all-MiniLM-L6-v2), BM25 from an FTS5 porter index with the same OR query of content
words. For each question, the share of its evidence (at most 10 turns) among the candidates, the
ceiling a perfect re-ranking could reach, for: the first stage as a recall of k=10 has it (`--n` per
signal, `base`), a larger one (2n, 4n), a second hop on the dense side (Rocchio: the query plus the mean
of the top hits' vectors), a second hop by BM25 on the top hits' words, the neighbouring turns of the top
hits, and hyphenated words joined ("de-stress" = "destress"). Only the ceiling: whether the ranking can
use what a variant adds is measured through the real recall (bench/locomo_recall.py).
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from locomo_recall import CATEGORIES, evidence_ids, turn_text, turns_of
from thoth_episodic.embedder import MiniLMEmbedder

from thoth_core.words import query_terms

RRF_K = 60


def joined(text: str) -> str:
    """Hyphenated words written as one: "de-stress" -> "destress"."""
    return re.sub(r"(\w)-(\w)", r"\1\2", text)


def fts(texts: list[str]) -> sqlite3.Connection:
    """An in-memory FTS5 porter index of the texts, rowid = position."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE f USING fts5(content, tokenize='porter unicode61')")
    db.executemany("INSERT INTO f(rowid, content) VALUES (?, ?)", list(enumerate(texts)))
    return db


def bm25(db: sqlite3.Connection, text: str, n: int) -> list[int]:
    """The best n rows for an OR query of the text's content words."""
    terms = query_terms(text)
    if not terms:
        return []
    match = " OR ".join(f'"{t}"' for t in terms)
    return [row for (row,) in db.execute("SELECT rowid FROM f WHERE f MATCH ? ORDER BY bm25(f) LIMIT ?", (match, n))]


def variants(n: int, vectors: np.ndarray, texts: list[str], db: sqlite3.Connection, joined_db: sqlite3.Connection):
    """name -> function(question, query vector) -> candidate rows."""

    def first(question: str, query: np.ndarray, size: int) -> tuple[list[int], list[int]]:
        return list(np.argsort(-(vectors @ query))[:size]), bm25(db, question, size)

    def fused_top(question: str, query: np.ndarray) -> list[int]:
        dense, lexical = first(question, query, n)
        score: dict[int, float] = {}
        for ranked in (dense, lexical):
            for rank, row in enumerate(ranked, 1):
                score[row] = score.get(row, 0.0) + 1 / (RRF_K + rank)
        return sorted(score, key=lambda row: -score[row])

    def base(q: str, v: np.ndarray) -> set[int]:
        return set().union(*first(q, v, n))

    def rocchio(m: int, beta: float) -> Callable[[str, np.ndarray], set[int]]:
        def hop(q: str, v: np.ndarray) -> set[int]:
            moved = v + beta * vectors[fused_top(q, v)[:m]].mean(axis=0)
            return base(q, v) | set(np.argsort(-(vectors @ (moved / np.linalg.norm(moved))))[:n])

        return hop

    return {
        "base": base,
        "2n per signal": lambda q, v: set().union(*first(q, v, 2 * n)),
        "4n per signal": lambda q, v: set().union(*first(q, v, 4 * n)),
        "dense second hop (top 5, beta 0.5)": rocchio(5, 0.5),
        "dense second hop (top 10, beta 0.5)": rocchio(10, 0.5),
        "dense second hop (top 5, beta 1)": rocchio(5, 1.0),
        "bm25 second hop (top 3 hits' words)": lambda q, v: (
            base(q, v) | set(bm25(db, " ".join(texts[row] for row in fused_top(q, v)[:3]), n))
        ),
        "neighbours of the top 20": lambda q, v: (
            base(q, v)
            | {row + step for row in fused_top(q, v)[:20] for step in (-1, 1) if 0 <= row + step < len(texts)}
        ),
        "hyphens joined": lambda q, v: set(first(q, v, n)[0]) | set(bm25(joined_db, joined(q), n)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--n", type=int, default=50, help="candidates per signal of the base (a k=10 recall: 50)")
    args = parser.parse_args()
    embedder = MiniLMEmbedder()
    found: dict[str, dict[str, list[float]]] = {}
    for sample in json.loads(args.data.read_text(encoding="utf-8")):
        turns = [turn for _, turn in turns_of(sample)]
        texts = [turn_text(turn) for turn in turns]
        vectors = embedder.embed([(f"{texts[i - 1][-200:]}\n" if i else "") + texts[i] for i in range(len(texts))])
        ways = variants(args.n, vectors, texts, fts(texts), fts([joined(t) for t in texts]))
        for qa in sample["qa"]:
            evidence = set(evidence_ids(qa.get("evidence", [])))
            if not evidence:
                continue
            query = embedder.embed([qa["question"]])[0]
            category = CATEGORIES[int(qa["category"])]
            for name, candidates in ways.items():
                held = {turns[row]["dia_id"] for row in candidates(qa["question"], query)}
                found.setdefault(name, {}).setdefault(category, []).append(
                    min(len(held & evidence), 10) / len(evidence)
                )
    report: dict[str, Any] = {
        "benchmark": "locomo_candidates",
        "data": str(args.data),
        "n": args.n,
        "ceiling_R@10": {
            name: {category: round(100 * statistics.fmean(shares), 1) for category, shares in by.items()}
            for name, by in found.items()
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
