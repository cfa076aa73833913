"""LoCoMo turn-level recall of the episodic plugin; prints JSON.

    python bench/locomo_recall.py --data ../shared/data/locomo/locomo-dev.json [--k 1,5,10,25] [--json]

Each dialog turn goes through the plugin's real write path (`post_turn_write`) as an episode
of peer = the conversation id, dated by its session (turns a second apart, in order);
the user text is `Speaker: text` (plus `[shares PHOTO]` when a photo caption is given).
Each question is answered by the real recall path restricted to its own conversation, as of
the day after the last session. Reports, overall and per category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop, 5 adversarial): R@k (mean fraction of evidence turns in the
top k, the LoCoMo paper's Table 3 measure), all@k, any@k, MRR@10, and timings. Cut-offs up to 10
and MRR come from a recall of k=10, as an agent asks; larger ones from a recall of 50. Beside them,
per category, `candidate_ceiling_k10`: the R@10 a perfect re-ranking of the candidates a recall of
k=10 ranks would reach (evidence beyond them no ranking can bring back).

It also records the dense and BM25 candidates of every question and, re-ranking them offline
(`fusion_cv.py`), prints `fusion`: R@1/5/10 and MRR of the hybrid vs BM25-only vs dense-only
(each signal removed, and recency removed), every rule of the fusion grid on all of dev (for
reference only), and leave-one-conversation-out cross-validation folds: the rule chosen on two
conversations, scored on the held-out third. Likewise `signals` (`signals_cv.py`): the post-fusion
signals (neighbouring turns, time, names) each removed, per conversation and category, and their
weights chosen per fold on two conversations and scored on the third. `--no-folds` skips both.
`--set neighbour_weight=0` etc. measures the real recall path with a signal off;
`--storage-url postgresql://...` (an empty database) runs it on the PostgreSQL backend; `--reindex`
re-embeds every episode from the store once a conversation is in (the vectors an import computes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fusion_cv import Question, candidate_ceiling, report
from signals_cv import report as signals_report
from thoth_episodic import plugin, postgres_store, sqlite_store
from thoth_episodic.memory import memory_for
from thoth_episodic.scoring import FUSIONS, candidate_count

from thoth_core.testing import make_test_runtime
from thoth_core.types import Reply, Session, Turn

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
WORKSPACE = "locomo"


def session_time(text: str) -> float:
    """`1:56 pm on 8 May, 2023` as unix seconds (UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC).timestamp()


def evidence_ids(raw: list[str]) -> list[str]:
    """Repaired dia ids: `D:11:26` -> `D11:26`, `D30:05` -> `D30:5`, several per string split."""
    found = []
    for item in raw:
        for part in re.split(r"[;\s,]+", item):
            match = re.match(r"D:?(\d+):0*(\d+)$", part.strip())
            if match:
                found.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return list(dict.fromkeys(found))


def turns_of(sample: dict[str, Any]) -> list[tuple[float, dict[str, Any]]]:
    """(time, turn) of every dialog turn, in order."""
    conversation = sample["conversation"]
    sessions = sorted((int(k.split("_")[1]), k) for k in conversation if re.fullmatch(r"session_\d+", k))
    out = []
    for _, key in sessions:
        start = session_time(conversation[f"{key}_date_time"])
        out += [(start + i, turn) for i, turn in enumerate(conversation[key])]
    return out


def turn_text(turn: dict[str, Any]) -> str:
    """The episode's user text for one dialog turn."""
    caption = f" [shares {turn['blip_caption']}]" if turn.get("blip_caption") else ""
    return f"{turn['speaker']}: {turn['text']}{caption}"


async def ingest(runtime: Any, sample: dict[str, Any]) -> tuple[int, float]:
    """Write every turn of a conversation through post_turn_write; returns (turns, seconds)."""
    peer = sample["sample_id"]
    session = Session(WORKSPACE, peer, peer, runtime=runtime)
    started = time.perf_counter()
    turns = turns_of(sample)
    for at, turn in turns:
        plugin.post_turn_write(
            turn=Turn(turn_text(turn), peer, peer, WORKSPACE, id=f"{peer}/{turn['dia_id']}", created_at=at),
            reply=Reply(text="", model="locomo"),
            session=session,
        )
    memory_for(runtime).flush()  # every turn's vector is stored
    return len(turns), time.perf_counter() - started


def score(top10: list[str], ranked: list[str], evidence: list[str], ks: list[int]) -> dict[str, float]:
    """R@k, all@k, any@k per k, and reciprocal rank (MRR@10), for one question.

    Up to k = 10 from a recall of k=10, as production asks (a recall of more ranks more candidates,
    which can reorder its first ten); beyond, from `ranked`, a recall of at least the largest k."""
    out: dict[str, float] = {}
    for k in ks:
        found = len(set((top10 if k <= 10 else ranked)[:k]) & set(evidence))
        out[f"R@{k}"] = found / len(evidence)
        out[f"all@{k}"] = float(found == len(evidence))
        out[f"any@{k}"] = float(found > 0)
    first = next((i for i, dia in enumerate(top10, 1) if dia in evidence), None)
    out["MRR"] = 1 / first if first else 0.0
    return out


def timings(ms: list[float]) -> dict[str, float]:
    """Median and 95th percentile of query times."""
    return {"median": round(statistics.median(ms), 2), "p95": round(statistics.quantiles(ms, n=20)[18], 2)}


def summarise(rows: list[dict[str, float]]) -> dict[str, float]:
    """Means over questions, in percent (MRR as a fraction)."""
    out: dict[str, float] = {}
    for key in rows[0] if rows else []:
        mean = statistics.fmean(row[key] for row in rows)
        out[key] = round(mean, 4) if key == "MRR" else round(100 * mean, 2)
    return out | {"questions": len(rows)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    ks = sorted(int(k) for k in args.k.split(","))
    data = json.loads(Path(args.data).read_text())
    settings: dict[str, Any] = dict(item.split("=", 1) for item in args.set)
    settings = {k: json.loads(v) if v[:1].isdigit() or v[:1] in "-[{" else v for k, v in settings.items()}
    with tempfile.TemporaryDirectory() as home:
        config: dict[str, Any] = {"plugins": {"episodic": settings}}
        if args.storage_url:  # the PostgreSQL backend, in that (empty) database's thoth_episodic schema
            config["storage"] = {"url": args.storage_url}
        runtime = make_test_runtime(Path(home), {"episodic": plugin}, config=config)
        memory = memory_for(runtime)
        memory.embed(["warm up"])
        turns, ingest_seconds, query_ms, query_ms_k10, query_ms_k10_off = 0, 0.0, [], [], []
        signals_off = replace(
            memory.settings, neighbour_weight=0.0, temporal_weight=0.0, entity_weight=0.0, speaker_weight=0.0
        )
        per_category: dict[int, list[dict[str, float]]] = {c: [] for c in CATEGORIES}
        skipped = 0
        seen: dict[str, Any] = {}
        questions: list[Question] = []
        real_rank, backends = sqlite_store.rank, (sqlite_store, postgres_store)

        def capturing(query: Any, dense: Any, lexical: Any, load: Any, fusion: Any = None) -> Any:
            seen.update(query=query, dense=list(dense), lexical=list(lexical), load=load)
            return real_rank(query, dense, lexical, load, fusion)

        for backend in backends:
            backend.rank = capturing  # type: ignore[attr-defined]
        for sample in data:
            n, seconds = await ingest(runtime, sample)
            if args.reindex:  # every vector from the stored episode, as an import or `thoth episodes reindex` makes it
                memory.flush()
                memory.reindex()
            turns, ingest_seconds = turns + n, ingest_seconds + seconds
            peer = sample["sample_id"]
            now = max(at for at, _ in turns_of(sample)) + 86400
            for qa in sample["qa"]:
                evidence = evidence_ids(qa.get("evidence", []))
                if not evidence:
                    skipped += 1
                    continue
                # timed with the signals off, then on: the second run's hits (`top10`) are the ones scored
                for measured, settings_now in ((query_ms_k10_off, signals_off), (query_ms_k10, memory.settings)):
                    memory.settings, kept = settings_now, memory.settings
                    started = time.perf_counter()
                    top10 = memory.recall(qa["question"], workspace=WORKSPACE, peer=peer, k=10, now=now)
                    measured.append(1000 * (time.perf_counter() - started))
                    memory.settings = kept
                started = time.perf_counter()
                hits = memory.recall(qa["question"], workspace=WORKSPACE, peer=peer, k=max(ks + [50]), now=now)
                query_ms.append(1000 * (time.perf_counter() - started))
                ranked = [h.episode.turn_id.split("/", 1)[1] for h in hits]
                ranked10 = [h.episode.turn_id.split("/", 1)[1] for h in top10]
                per_category[int(qa["category"])].append(score(ranked10, ranked, evidence, ks))
                keys = [key for key, _, _ in seen["dense"] + seen["lexical"]]
                episodes = seen["load"](list(dict.fromkeys(keys)))
                category = int(qa["category"])
                questions.append(
                    Question(peer, seen["query"], seen["dense"], seen["lexical"], episodes, evidence, category)
                )
        for backend in backends:
            backend.rank = real_rank  # type: ignore[attr-defined]
        await runtime.aclose()
    everything = [row for rows in per_category.values() for row in rows]
    return {
        "benchmark": "locomo_recall",
        "data": str(args.data),
        "settings": dict(memory.settings.__dict__),
        "conversations": len(data),
        "turns": turns,
        "skipped_questions_without_evidence": skipped,
        "overall": summarise(everything),
        "overall_excluding_adversarial": summarise([r for c, rows in per_category.items() if c != 5 for r in rows]),
        "per_category": {f"{c} {name}": summarise(per_category[c]) for c, name in CATEGORIES.items()},
        # R@10 a perfect re-ranking of what a recall of k=10 ranks (its candidates per signal) would reach
        "candidate_ceiling_k10": {
            f"{c} {name}": candidate_ceiling([q for q in questions if q.category == c], candidate_count(10))
            for c, name in CATEGORIES.items()
        },
        "ingest": {"seconds": round(ingest_seconds, 2), "turns_per_second": round(turns / ingest_seconds, 1)},
        "query_ms": {
            "median": round(statistics.median(query_ms), 2),
            "p95": round(statistics.quantiles(query_ms, n=20)[18], 2),
        },
        # what a production recall of k=10 costs (the measured one asks for 50), and without the signals
        "query_ms_k10": timings(query_ms_k10),
        "query_ms_k10_signals_off": timings(query_ms_k10_off),
    } | ({} if args.no_folds else folds(questions, memory.settings))


def folds(questions: list[Question], settings: Any) -> dict[str, Any]:
    """Fusion's and the signals' ablations and leave-one-conversation-out folds; the candidates' R@10 ceiling."""
    by_category = {f"{c} {name}": [q for q in questions if q.category == c] for c, name in CATEGORIES.items()}
    return {
        "signals": signals_report(questions, FUSIONS[settings.fusion], settings.signals),
        "fusion": report(questions, settings.fusion),
        "candidate_ceiling": {name: candidate_ceiling(qs) for name, qs in by_category.items()},
    }


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a LoCoMo-format JSON file")
    parser.add_argument("--k", default="1,5,10,25", help="comma-separated cut-offs")
    parser.add_argument("--json", action="store_true", help="compact JSON (default: indented)")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [plugins.episodic] setting, e.g. fusion=score",
    )
    parser.add_argument(
        "--storage-url", help="run on the PostgreSQL backend: an empty database's postgresql:// URL ([storage] url)"
    )
    parser.add_argument("--no-folds", action="store_true", help="skip the fusion grid and cross-validation")
    parser.add_argument("--reindex", action="store_true", help="re-embed every episode after each conversation")
    args = parser.parse_args()
    result = asyncio.run(main(args))
    json.dump(result, sys.stdout, indent=None if args.json else 2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    cli()
