"""Episodic memory's part of `thoth bundle`: every current episode, as `thoth episodes export` writes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from thoth_core import ThothError, hookimpl

from .memory import memory_for
from .records import Episode

if TYPE_CHECKING:
    from thoth_core.runtime import Runtime

SECTION = "episodic"
VERSION = 1
BATCH = 256


@hookimpl
def bundle_export(runtime: Runtime) -> dict[str, Any]:
    """Every current episode of every workspace and peer, oldest first (a re-import embeds them again)."""
    store = memory_for(runtime).store
    records = (episode.to_dict() for episode in store.episodes())
    return {"name": SECTION, "version": VERSION, "count": store.count(), "records": records}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Store the section's episodes (known ones are skipped), embedding them in batches."""
    if section["name"] != SECTION:
        return None
    if section["version"] != VERSION:
        raise ThothError(
            f"bundle section {SECTION}: version {section['version']!r} unknown (this thoth reads {VERSION})"
        )
    memory = memory_for(runtime)
    added = 0
    for chunk in _chunks(section["records"]):
        added += memory.write_many(chunk, progress=progress, batch=BATCH)
    return {"episodes": added}


def _chunks(records: Any) -> Iterator[list[Episode]]:
    chunk: list[Episode] = []
    for number, record in enumerate(records, 1):
        try:
            chunk.append(Episode.from_dict(record))
        except TypeError as exc:
            raise ThothError(f"bundle section {SECTION}: record {number}: not an episode: {exc}") from exc
        if len(chunk) == BATCH:
            yield chunk
            chunk = []
    if chunk:
        yield chunk
