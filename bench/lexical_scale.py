"""Each store's full-text stage at scale, on conversation text; prints JSON.

    python bench/lexical_scale.py --data ../shared/data/locomo/locomo-dev.json [--n 300000] [--json]
    python bench/lexical_scale.py --storage-url postgresql://... [--n 1000000]   # the PostgreSQL backend

The synthetic texts of `episodic_latency.py` draw words evenly from topics, so no word is common
there. Here, for each dev conversation (a fold), a store holds its turns amid `--n` distractor
rows, each two turns of the other two conversations (their words as common as in real chat, their
names other people's); the conversation's questions (all but adversarial) go to the full-text stage
as the store runs it (`_lexical`, the candidates it hands to fusion). Per fold and setting: the
stage's median and p90 ms, and R@10 / R@50 of the evidence turns among its candidates. Settings
(`scoring.large_store_matches` is the way a store of `PAIRED_ROWS` rows or more matches):
`every_match` ranks every row holding any word (how a small store ranks); `all_words` ranks rows
holding two of them first; `share_F` does so after leaving out the words held by more than a share
F of the rows (`COMMON_SHARE`).
`choice` picks a share per fold on the other two conversations (the fastest there whose R@10 and
R@50 are each within a point of `all_words`), scored on its own. On a slow 2-core machine the run
takes about 9 minutes at 300k, 20 at 1M.

With `--storage-url` (an empty database) the stores are PostgreSQL's, loaded with COPY and then
analysed (as autovacuum does after a bulk load), and the settings are those of `postgres_fts`, each
word's `ts_rank` weighted by its inverse document frequency; `words_alike` weighs every word 1, as
`ts_rank` alone would; `every_row_of_the_words` is the default share, but when too few rows hold two
words it ranks every row holding one, not just the rows of the rarest words (`scoring.filling`); and
`every_match` is left out (a query holding a common word takes seconds).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from locomo_recall import evidence_ids, turn_text, turns_of
from thoth_episodic import postgres_fts, scoring, sqlite_fts
from thoth_episodic.records import Episode, Query
from thoth_episodic.sqlite_store import SQLiteStore

SHARES = (0.05, 0.1, 0.2)
SETTINGS: dict[str, dict[str, Any]] = {  # what each setting changes from the shipped defaults
    "every_match": {"PAIRED_ROWS": 10**15},  # SQLite only: a PostgreSQL query of a common word takes seconds
    "all_words": {"COMMON_SHARE": 1.0},
    **{f"share_{f}": {"COMMON_SHARE": f} for f in SHARES},
    "every_row_of_the_words": {"filling": lambda terms, held, wanted: list(terms)},  # before 2026-11-29
    "words_alike": {"idf": lambda held, rows: 1.0},  # PostgreSQL only: `ts_rank` without the rarity weights
}
ONLY = {"every_match": sqlite_fts, "every_row_of_the_words": postgres_fts, "words_alike": postgres_fts}
DEFAULTS = {
    module: {"PAIRED_ROWS": module.PAIRED_ROWS, "COMMON_SHARE": module.COMMON_SHARE, "filling": scoring.filling}
    | ({"idf": module.idf} if module is postgres_fts else {})
    for module in (sqlite_fts, postgres_fts)
}
SCOPE = "workspace = %(workspace)s AND peer = %(peer)s AND agent = %(agent)s AND superseded_at IS NULL"
CLOSE_TO_ALL_WORDS = 1.0  # R@10 and R@50 points a share may lose against every word, for `choice`


def episodes(own: list[tuple[str, str]], others: list[str], n: int, seed: int) -> Iterator[list[Episode]]:
    """Batches of `n` distractor rows with the conversation's turns (id, text) in the middle."""
    rng, start = random.Random(seed), time.time() - 10 * 365 * 86400
    half = n // 2

    def distractors(count: int, offset: int) -> Iterator[list[Episode]]:
        for first in range(0, count, 20_000):
            size = min(20_000, count - first)
            texts = [f"{rng.choice(others)}\n{rng.choice(others)}" for _ in range(size)]
            at = start + offset + first
            yield [Episode("w", "p", f"t{(at + i) // 20}", t, occurred_at=at + i) for i, t in enumerate(texts)]

    yield from distractors(half, 0)
    yield [Episode("w", "p", "own", text, id=dia, occurred_at=start + half + i) for i, (dia, text) in enumerate(own)]
    yield from distractors(n - half, half + len(own))


def filled_store(folder: Path, batches: Iterator[list[Episode]]) -> SQLiteStore:
    store = SQLiteStore(folder / "episodes.db", ann="exact")
    for batch in batches:
        store.add(batch)
    return store


def filled_postgres(url: str, batches: Iterator[list[Episode]]) -> Any:
    """A PostgreSQL store of these rows in a new `thoth_episodic` schema of that database, loaded with COPY."""
    import psycopg
    from postgres_recall import copy_into_postgres
    from thoth_episodic.postgres_store import SCHEMA, PostgresStore

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    store = PostgresStore(url, schema=SCHEMA, ann="exact")
    copy_into_postgres(url, (episode for batch in batches for episode in batch))
    return store


def stage(store: Any, text: str) -> list[tuple[int, float, float]]:
    """The full-text candidates as the store's search reads them."""
    if isinstance(store, SQLiteStore):
        return store._lexical(Query(text, "w", "p", k=10), None)
    asked = {"workspace": "w", "peer": "p", "agent": "default", "n": 50, "newest": None, "as_of": None}
    return store._lexical(text, SCOPE, asked)


def use(setting: str, module: Any) -> None:
    """Set the backend's full-text module (and `scoring.filling`) as the setting says."""
    for name, value in (DEFAULTS[module] | SETTINGS[setting]).items():
        setattr(scoring if name == "filling" else module, name, value)


def fold(sample: dict[str, Any], others: list[str], n: int, seed: int, url: str | None) -> dict[str, dict[str, float]]:
    """Each setting's timings and evidence recall over one conversation's questions."""
    own = [(turn["dia_id"], turn_text(turn)) for _, turn in turns_of(sample)]
    questions = [q for q in sample["qa"] if q.get("category") != 5 and evidence_ids(q.get("evidence", []))]
    module = postgres_fts if url else sqlite_fts
    settings = [name for name in SETTINGS if ONLY.get(name, module) is module]
    found: dict[str, dict[str, list[float]]] = {name: {"ms": [], "r10": [], "r50": []} for name in settings}
    with tempfile.TemporaryDirectory() as scratch:
        batches = episodes(own, others, n, seed)
        store = filled_postgres(url, batches) if url else filled_store(Path(scratch), batches)
        ids = dict(
            store._rows("SELECT rowid, id FROM thoth_episodes WHERE thread = 'own'")
            if url
            else store._db.execute("SELECT rowid, id FROM episodes WHERE thread = 'own'").fetchall()
        )
        try:
            for question in questions:
                evidence = set(evidence_ids(question["evidence"]))
                for name in settings:
                    use(name, module)
                    started = time.perf_counter()
                    rows = stage(store, question["question"])
                    found[name]["ms"].append(1000 * (time.perf_counter() - started))
                    ranked = [ids.get(rowid) for rowid, _, _ in rows]
                    for k in (10, 50):
                        found[name][f"r{k}"].append(len(evidence & set(ranked[:k])) / len(evidence))
        finally:
            store.close()
    return {name: summary(values) for name, values in found.items()}


def summary(values: dict[str, list[float]]) -> dict[str, float]:
    """Median and p90 ms, R@10 and R@50 in percent."""
    ms = sorted(values["ms"])
    return {
        "median_ms": round(statistics.median(ms), 1),
        "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1),
        "r10": round(100 * statistics.mean(values["r10"]), 1),
        "r50": round(100 * statistics.mean(values["r50"]), 1),
        "questions": len(ms),
    }


def choice(folds: dict[str, dict[str, dict[str, float]]]) -> dict[str, Any]:
    """Per fold: the share chosen on the other folds (pooled by question count), and its figures on this one."""
    out = {}
    for held_out in folds:
        train = [f for name, f in folds.items() if name != held_out]

        def pooled(setting: str, key: str) -> float:
            return sum(f[setting][key] * f[setting]["questions"] for f in train) / sum(
                f[setting]["questions"] for f in train
            )

        close = [
            f"share_{s}"
            for s in SHARES
            if all(pooled(f"share_{s}", r) >= pooled("all_words", r) - CLOSE_TO_ALL_WORDS for r in ("r10", "r50"))
        ]
        chosen = min(close, key=lambda s: pooled(s, "median_ms")) if close else "all_words"
        out[held_out] = {"chosen": chosen, **folds[held_out][chosen]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).parents[2] / "shared/data/locomo/locomo-dev.json")
    parser.add_argument("--n", type=int, default=300_000, help="Distractor rows in each store.")
    parser.add_argument("--json", action="store_true", help="One line of JSON (default: indented).")
    parser.add_argument("--storage-url", help="the PostgreSQL backend, in this (empty) database")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    folds = {}
    for index, sample in enumerate(samples):
        others = [turn_text(t) for j, s in enumerate(samples) if j != index for _, t in turns_of(s)]
        folds[sample["sample_id"]] = fold(sample, others, args.n, seed=index, url=args.storage_url)
    result = {"n": args.n, "backend": "postgres" if args.storage_url else "sqlite", "folds": folds}
    result["choice"] = choice(folds)
    print(json.dumps(result, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
