"""Reflection's memory records: the reflexion records approved into `reflexion/`, and the approved rules; read-only.

A reflexion record (`reflexion:<file>.md`) is the agent's, like the procedural files, so every peer
sees it. A rule (`rule:<item id>`) is an approved persona observation or guideline, as appended to
the persona rules: a guideline is about no one and shown to every peer; a persona observation a
session of one peer proposed is shown to that peer only (in that workspace), never to another.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import MemoryRecord, RecallHit, ThothError, hookimpl

from . import reflexion_files
from .settings import State, state

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

LAYER = "reflection"
KINDS = ("reflexion", "rule")
RULE_KINDS = ("persona-observation", "guideline")
RULE = "rule:"
REFLEXION = "reflexion:"


def reflexion_record(st: State, path: Path) -> MemoryRecord | None:
    """A reflexion record file as a record (its frontmatter in `meta`), or None when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
        at = path.stat().st_mtime
    except (OSError, UnicodeDecodeError) as exc:
        logger.error("reflection: %s: cannot read reflexion record: %s", path, exc)
        return None
    meta: dict[str, Any] = {"path": str(Path(st.settings.reflexion_dir) / path.name)}
    try:
        front, _sections = reflexion_files.parse(text, source=str(path))
        meta.update({k: v for k, v in front.items() if k not in meta})
    except ThothError as exc:  # shown as it is, with what is wrong
        meta["problem"] = str(exc)
    return {
        "layer": LAYER,
        "kind": "reflexion",
        "id": f"{REFLEXION}{path.name}",
        "text": text,
        "at": at,
        "editable": False,
        "meta": meta,
    }


def reflexion_records(st: State) -> list[MemoryRecord]:
    """Every record file of the reflexion folder."""
    folder = st.path(st.settings.reflexion_dir)
    paths = sorted(folder.glob("*.md")) if folder.is_dir() else []
    found = [reflexion_record(st, p) for p in paths if p.is_file() and not p.is_symlink()]
    return [r for r in found if r is not None]


def shown_to(item: dict[str, Any], peer: str, workspace: str) -> bool:
    """Whether a peer may see an approved rule: one about no one, or one their own session proposed."""
    owner = item["source"].get("peer")
    return owner is None or (owner, item["source"].get("workspace")) == (peer, workspace)


def rule_record(st: State, item: dict[str, Any]) -> MemoryRecord:
    """An approved persona observation or guideline as a record."""
    meta = {"item_kind": item["kind"], "decided_by": item.get("decided_by"), "file": st.settings.observations_file}
    return {
        "layer": LAYER,
        "kind": "rule",
        "id": f"{RULE}{item['id']}",
        "text": item["text"],
        "at": float(item.get("decided_at") or item["created_at"]),
        "editable": False,
        "meta": meta,
    }


def rule_records(st: State, peer: str, workspace: str) -> list[MemoryRecord]:
    """The approved rules this peer may see."""
    items = [i for kind in RULE_KINDS for i in st.store.items_of_kind(kind)]
    return [rule_record(st, i) for i in items if i["status"] == "approved" and shown_to(i, peer, workspace)]


@hookimpl
def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord] | None:
    if kind is not None and kind not in KINDS:
        return None
    st = state(runtime)
    found = (reflexion_records(st) if kind in (None, "reflexion") else []) + (
        rule_records(st, peer, workspace) if kind in (None, "rule") else []
    )
    found = [r for r in found if before is None or r["at"] < before]
    found.sort(key=lambda r: r["at"], reverse=True)
    return found[:limit]


@hookimpl
def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[RecallHit]:
    """The reflexion records and the rules this peer may see that match a query, each by its best paragraph."""
    st = state(runtime)
    return runtime.meaning.record_hits(query, reflexion_records(st) + rule_records(st, peer, workspace), limit=limit)


@hookimpl
def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    st = state(runtime)
    if record_id.startswith(REFLEXION):
        path = reflexion_files.locate(st.path(st.settings.reflexion_dir), record_id[len(REFLEXION) :])
        found = reflexion_record(st, path) if path is not None and path.name == record_id[len(REFLEXION) :] else None
        return {**found, "history": []} if found is not None else None
    if record_id.startswith(RULE):
        item = st.store.item(record_id[len(RULE) :])
        if item is None or item["kind"] not in RULE_KINDS or item["status"] != "approved":
            return None
        return {**rule_record(st, item), "history": []} if shown_to(item, peer, workspace) else None
    return None
