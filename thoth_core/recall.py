"""One recall over every layer: each plugin's hits fused into one list, and how a hit is shown.

Each plugin ranks its own hits, and its scores mean nothing to another plugin's. Two ranks do:
the hit's rank in its plugin's list, and its rank by meaning among all the hits whose cosine
(`why["dense"]`, from the one embedder every layer uses, `thoth_core.meaning`) reaches FLOOR. A hit's
fused score is the reciprocal rank fusion of the two (`RRF_K`). The lists are merged by that score,
each plugin's own order kept (a layer knows its hits best); with no embedder the list is each
plugin's best, then each one's second, and so on. Every hit keeps its plugin's `why` and gains
`fused`: the score and both ranks.

This module imports nothing heavy: the thin `thoth recall` prints a service's hits with `hit_lines`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

RRF_K = 60  # reciprocal rank fusion's constant, as episodic's `rrf`
# The cosine at which a text is related to a query. On LoCoMo dev (bench/meaning_floor.py), per conversation,
# 0.3 keeps 89-93% of the turns that answer a question and 34-47% of the others, which are about the same two
# people; 0.25 keeps 94-97% and 50-61%, 0.35 80-86% and 20-32%.
FLOOR = 0.3


@dataclass(frozen=True)
class Recalled:
    """What `Runtime.recall` found: the fused hits, and the plugins that could not answer (status, error)."""

    peer: str
    workspace: str
    query: str
    hits: list[dict[str, Any]]
    failed: list[dict[str, Any]]

    def as_dict(self) -> dict[str, Any]:
        """As the service's API and `thoth recall --json` give it."""
        return asdict(self)


def fuse(ranked: list[list[dict[str, Any]]], limit: int) -> list[dict[str, Any]]:
    """One list from each plugin's best-first hits, at most `limit`; each plugin's own order is kept.

    Each hit gains `fused`: its rank in its plugin's list, its rank by meaning among all hits with a
    cosine of at least FLOOR, and the reciprocal rank fusion of the two. The list takes, each time, the best-scored of
    the plugins' next hits (ties: the earlier plugin), so without cosines it is each plugin's first,
    then each one's second, and so on.
    """
    cosines = {
        (p, r): c for p, hits in enumerate(ranked) for r, hit in enumerate(hits) if (c := _cosine(hit) or 0.0) >= FLOOR
    }
    meaning_rank = {key: n for n, key in enumerate(sorted(cosines, key=lambda key: -cosines[key]), 1)}
    queues = []
    for p, hits in enumerate(ranked):
        queue = []
        for r, hit in enumerate(hits):
            by_meaning = meaning_rank.get((p, r))
            score = 1 / (RRF_K + r + 1) + (1 / (RRF_K + by_meaning) if by_meaning else 0.0)
            queue.append(dict(hit, fused={"score": round(score, 6), "layer_rank": r + 1, "meaning_rank": by_meaning}))
        queues.append(queue)
    out: list[dict[str, Any]] = []
    while len(out) < limit and any(queues):
        best = max((q for q in queues if q), key=lambda q: q[0]["fused"]["score"])  # max keeps the first of ties
        out.append(best.pop(0))
    return out


def _cosine(hit: dict[str, Any]) -> float | None:
    why = hit.get("why")
    value = why.get("dense") if isinstance(why, dict) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def explain_why(why: Any) -> str:
    """The signals a hit matched on, as `name value; ...` (unset ones left out)."""
    if not isinstance(why, dict):
        return str(why) if why else "-"
    shown = [
        f"{k} {', '.join(map(str, v)) if isinstance(v, list) else v}" for k, v in why.items() if v not in (None, [])
    ]
    return "; ".join(shown) or "-"


def when(at: Any) -> str:
    """A unix time as a local date and time, or empty."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at)) if isinstance(at, int | float) and at > 0 else ""


def hit_lines(hits: list[dict[str, Any]], *, ids: bool = False) -> list[str]:
    """Each hit as two lines: number, layer, kind, the text (and its id, with `ids`); then why it matched and when."""
    lines = []
    for number, hit in enumerate(hits, start=1):
        text = " ".join(str(hit.get("text", "")).split())
        head = f"{number}. [{hit.get('layer') or hit.get('plugin', '?')} {hit.get('kind', 'item')}] {text}"
        head += f"  (id {hit['id']})" if ids and hit.get("id") else ""
        fused = hit.get("fused") or {}
        ranks = [f"#{fused['layer_rank']} in its layer"] if fused.get("layer_rank") else []
        ranks += [f"#{fused['meaning_rank']} by meaning"] if fused.get("meaning_rank") else []
        thread = f"thread {hit['thread']}" if hit.get("thread") else ""
        stamp = ", ".join(part for part in (when(hit.get("at")), thread) if part)
        place = ", ".join(ranks) + " " if ranks else ""
        lines += [head, f"   {place}({explain_why(hit.get('why'))}){'; ' + stamp if stamp else ''}"]
    return lines


def answer_lines(found: dict[str, Any], *, ids: bool = False) -> list[str]:
    """A recall answer (`Recalled.as_dict()`) for a person: what matched, then each hit (with its id, with `ids`)."""
    hits, peer, query = found["hits"], found["peer"], found["query"]
    head = f"{len(hits)} memories of {peer} matching {query!r}:" if hits else f"Nothing of {peer}'s matches."
    return [head, *hit_lines(hits, ids=ids)]


def failure_line(failed: dict[str, Any]) -> str:
    """One plugin that could not answer a recall, as one line naming it."""
    return " ".join(f"plugin {failed['plugin']!r} could not recall ({failed['status']}): {failed.get('error')}".split())


__all__ = ["FLOOR", "RRF_K", "Recalled", "answer_lines", "explain_why", "failure_line", "fuse", "hit_lines", "when"]
