"""The procedural layer's memory records: persona files, installed skills and knowledge notes; read-only.

These are the agent's files, the same for every peer (each peer's context gets them all), so every
peer sees them; none is any one peer's. Ids: `persona:<FILE>.md`, `skill:<slug>`, `knowledge:<topic>`;
`at` is the file's modification time, `meta["path"]` the file relative to the project root.
MEMORY.md is the working layer's and reflexion records are reflection's: neither is listed here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import MemoryRecord, RecallHit, hookimpl

from .knowledge import read_notes
from .persona import PERSONA_ORDER, PersonaError, read_persona_file
from .settings import Settings
from .skills import discover, load_skill
from .validate import SkillDoc, SkillError

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

LAYER = "procedural"
KINDS = ("persona", "skill", "knowledge")


def _record(kind: str, name: str, text: str, path: Path, root: Path, **meta: Any) -> MemoryRecord:
    try:
        at = path.stat().st_mtime
    except OSError:
        at = 0.0
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return {
        "layer": LAYER,
        "kind": kind,
        "id": f"{kind}:{name}",
        "text": text,
        "at": at,
        "editable": False,
        "meta": {"path": str(shown), **meta},
    }


def persona_records(settings: Settings, root: Path, names: tuple[str, ...] = PERSONA_ORDER) -> list[MemoryRecord]:
    """The persona files present, in stack order; an unreadable one is logged and left out."""
    found = []
    for rank, name in enumerate(PERSONA_ORDER):
        if name not in names:
            continue
        path = settings.persona / name
        try:
            text = read_persona_file(path)
        except PersonaError as exc:
            logger.error("%s", exc)
            continue
        if text:
            found.append(_record("persona", name, text, path, root, order=rank))
    return found


def skill_record(settings: Settings, root: Path, skill: SkillDoc) -> MemoryRecord:
    """An installed skill: its whole SKILL.md, the description in `meta`."""
    path = settings.skills / skill.slug / "SKILL.md"
    return _record("skill", skill.slug, skill.text, path, root, description=skill.description)


def knowledge_records(settings: Settings, root: Path) -> list[MemoryRecord]:
    """The knowledge notes, by topic."""
    return [_record("knowledge", path.stem, text, path, root) for path, text in read_notes(settings.knowledge)]


def all_records(runtime: Runtime, kind: str | None) -> list[MemoryRecord]:
    """Every record of one kind (None: all)."""
    settings, root = Settings.of(runtime), Path(runtime.config.root)
    found: list[MemoryRecord] = []
    if kind in (None, "persona"):
        found += persona_records(settings, root)
    if kind in (None, "skill"):
        found += [skill_record(settings, root, s) for s in discover(settings.skills, settings.limits).skills]
    if kind in (None, "knowledge"):
        found += knowledge_records(settings, root)
    return found


@hookimpl
def memory_records(runtime: Runtime, kind: str | None, limit: int, before: float | None) -> list[MemoryRecord] | None:
    if kind is not None and kind not in KINDS:
        return None
    found = [r for r in all_records(runtime, kind) if before is None or r["at"] < before]
    found.sort(key=lambda r: r["at"], reverse=True)
    return found[:limit]


@hookimpl
def recall(query: str, limit: int, runtime: Runtime) -> list[RecallHit]:
    """The knowledge notes (by their best paragraph) and skills (by name and description) matching a query."""
    skills: list[MemoryRecord] = [
        {**skill, "text": f"{skill['id'].removeprefix('skill:')}: {skill.get('meta', {}).get('description', '')}"}
        for skill in all_records(runtime, "skill")
    ]  # a skill is chosen by its description, as `/skill` and the skills index offer it; its steps are not searched
    return runtime.meaning.record_hits(query, all_records(runtime, "knowledge") + skills, limit=limit)


@hookimpl
def memory_record(record_id: str, runtime: Runtime) -> MemoryRecord | None:
    kind, _, name = record_id.partition(":")
    if kind not in KINDS or not name:
        return None
    settings, root = Settings.of(runtime), Path(runtime.config.root)
    found: list[MemoryRecord] = []
    if kind == "persona":
        found = persona_records(settings, root, names=(name,))
    elif kind == "skill":
        try:
            found = [skill_record(settings, root, load_skill(settings.skills, name, settings.limits))]
        except SkillError:
            return None
    else:
        found = [r for r in knowledge_records(settings, root) if r["id"] == record_id]
    return {**found[0], "history": []} if found else None
