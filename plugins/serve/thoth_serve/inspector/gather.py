"""What the pages show, asked of the runtime's public methods: records, recall hits, approvals with diffs, plots."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .diffs import DiffLine, diff_lines
from .plots import cumulative

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.types import MemoryRecord

    from .view import Who

logger = logging.getLogger(__name__)

GROWTH_LIMIT = 2000  # records read for the growth plot (newest first)
PAGE = 200
PAGE_SIZE = 50  # records a list page shows; "Older" shows the next ones
FILE_KINDS = ("persona", "skill", "knowledge", "reflexion", "rule")
IDENTITY_KINDS = ("fact", "observation", "note")


async def records(runtime: Runtime, who: Who, *, layer: str | None = None, kind: str | None = None,
                  limit: int = 50, before: float | None = None) -> list[MemoryRecord]:
    """The peer's records, newest first."""
    return await runtime.records(
        peer=who.peer, workspace=who.workspace, layer=layer, kind=kind, limit=limit, before=before
    )


async def growth(runtime: Runtime, who: Who) -> list[tuple[float, float]]:
    """How many records the peer had over time: from each record's `at` (the newest GROWTH_LIMIT)."""
    times: list[float] = []
    before: float | None = None
    while len(times) < GROWTH_LIMIT:
        page = await records(runtime, who, limit=PAGE, before=before)
        times += [float(r["at"]) for r in page]
        if len(page) < PAGE:
            break
        before = min(float(r["at"]) for r in page)
    return cumulative(times)


@dataclass(frozen=True)
class Hit:
    """One recall hit: its layer, kind, text, score, when, and why it matched (the signals as name/value pairs)."""

    plugin: str
    layer: str
    kind: str
    id: str
    text: str
    score: float | None
    at: float | None
    why: list[tuple[str, str]]
    record: bool = False  # its id is a record's (`/records/ID` opens it); not every layer's hit ids are


async def with_records(runtime: Runtime, who: Who, hits: list[Hit]) -> list[Hit]:
    """The hits, each marked when its id opens one of the peer's records (so no link leads nowhere)."""
    found = await asyncio.gather(
        *(runtime.get_record(record_id=hit.id, peer=who.peer, workspace=who.workspace) for hit in hits)
    )
    return [replace(hit, record=record is not None) for hit, record in zip(hits, found, strict=True)]


def _why(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        return [(str(k), _short(v)) for k, v in value.items()]
    return [("why", _short(value))] if value not in (None, "") else []


def _short(value: Any) -> str:
    text = f"{value:.3g}" if isinstance(value, float) else str(value)
    return text if len(text) <= 200 else text[:197] + "..."


async def recall(runtime: Runtime, who: Who, query: str, *, layer: str | None = None,
                 limit: int = 20) -> tuple[list[Hit], list[str]]:
    """Every layer's hits for the query (or one layer's) in one list, explained; one line per layer that failed."""
    found = await runtime.recall(query=query, peer=who.peer, workspace=who.workspace, limit=limit, layer=layer)
    hits: list[Hit] = []
    for item in found.hits:
        plugin, score, at, fused = item["plugin"], item.get("score"), item.get("at"), item.get("fused") or {}
        place = [("place", f"#{fused['layer_rank']} in its layer")] if fused.get("layer_rank") else []
        place += [("by meaning", f"#{fused['meaning_rank']}")] if fused.get("meaning_rank") else []
        hits.append(Hit(
            plugin=plugin, layer=str(item.get("layer") or runtime.layer_of(plugin)), kind=str(item.get("kind", "")),
            id=str(item.get("id", "")), text=str(item["text"]),
            score=float(score) if isinstance(score, int | float) else None,
            at=float(at) if isinstance(at, int | float) else None, why=place + _why(item.get("why")),
        ))
    return hits, [f"{f['plugin']}: {f['status']} {f['error'] or ''}".strip() for f in found.failed]


@dataclass(frozen=True)
class Pending:
    """An approval item with what it would change (a diff against what stands now)."""

    item: dict[str, Any]
    diff: list[DiffLine]
    replaces: str  # what stands now, when anything does ("" for something new)
    editable: str  # what an edit replaces: a skill's instructions (its SKILL.md body), else the item's body


async def approvals(runtime: Runtime, who: Who) -> list[Pending]:
    """The items the approvals policy lets this person see, each with its diff."""
    items = await runtime.approvals(actor=who.peer, workspace=who.workspace)
    current = {}
    if any(item.get("kind") == "skill" for item in items):
        current = {_slug(r): r["text"] for r in await records(runtime, who, kind="skill", limit=PAGE)}
    out = []
    for item in items:
        item = {k: v for k, v in item.items() if k != "path"}  # a server-side path is no browser's business
        before = str(item.get("current") or current.get(_item_slug(item), ""))
        body = str(item.get("body", ""))
        editable = instructions(body) if item.get("kind") == "skill" else body
        out.append(Pending(item, diff_lines(before, body), before, editable))
    return out


def instructions(skill_md: str) -> str:
    """A SKILL.md's body: the text after its front matter (what editing a skill draft replaces)."""
    if not skill_md.startswith("---"):
        return skill_md
    _, sep, rest = skill_md[3:].partition("\n---")
    return rest.partition("\n")[2].lstrip("\n") if sep else skill_md


def _slug(record: MemoryRecord) -> str:
    meta = record.get("meta") or {}
    return str(meta.get("slug") or meta.get("name") or record["id"].rpartition(":")[2])


def _item_slug(item: dict[str, Any]) -> str:
    key = str(item.get("id", "")).removeprefix("skill:")
    return key.rpartition("--")[0] if "--" in key else key


@dataclass(frozen=True)
class Link:
    """A link of the entity graph: an entity, the relation (a fact's predicate), what it points to, and the fact."""

    source: str
    relation: str
    target: str
    entity: bool  # the target is an entity too (drawn in the graph), not a plain value
    fact: str | None  # the fact's record id


def entity_links(entities: list[MemoryRecord]) -> tuple[list[str], list[Link]]:
    """The entity graph from the identity layer's entity records: their names and links (`meta.links`)."""
    names: list[str] = []
    links: list[Link] = []
    for record in entities:
        name = record["text"].strip()
        names.append(name)
        for link in (record.get("meta") or {}).get("links") or []:
            if not isinstance(link, dict):
                continue
            target = str(link.get("to") or link.get("target") or "").strip()
            relation = str(link.get("predicate") or link.get("relation") or "").strip()
            fact = link.get("fact")
            if target:
                links.append(Link(name, relation, target, bool(link.get("entity")), str(fact) if fact else None))
    return names, links


def latency(samples: list[dict[str, Any]], kind: str = "recall") -> list[tuple[float, float]]:
    """(time, milliseconds) of the service's metrics samples of one kind (`{"at", "kind", "ms"}`)."""
    points = []
    for sample in samples:
        at, value = sample.get("at"), sample.get("ms")
        if sample.get("kind") == kind and isinstance(at, int | float) and isinstance(value, int | float):
            points.append((float(at), float(value)))
    return points


def ago(at: float | None, now: float | None = None) -> str:
    """How long ago, in words a person reads at a glance."""
    if not at:
        return ""
    seconds = max(0.0, (now or time.time()) - at)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size:
            return f"{int(seconds // size)} {unit} ago"
    return "just now"
