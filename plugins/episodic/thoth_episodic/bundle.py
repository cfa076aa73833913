"""Episodic memory's part of `thoth bundle`: every current episode, as `thoth episodes export` writes it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from thoth_core import BundleSection, ThothError, hookimpl

from .memory import memory_for
from .records import Episode

if TYPE_CHECKING:
    from thoth_core import Runtime

SECTION = "episodic"
VERSION = 1
BATCH = 256


@hookimpl
def bundle_export(runtime: Runtime) -> BundleSection:
    """Every current episode of every workspace and peer, oldest first (a re-import embeds them again)."""
    store = memory_for(runtime).store
    records = (episode.to_dict() for episode in store.episodes())
    return {"name": SECTION, "version": VERSION, "count": store.count(), "records": records}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Store the section's episodes (known ones are skipped), embedding one batch while the last is committed."""
    from thoth_core.bundle import own_section

    if not own_section(section, SECTION, VERSION):
        return None
    added = memory_for(runtime).write_many(_episodes(section["records"]), progress=progress, batch=BATCH)
    return {"episodes": added}


def _episodes(records: Any) -> Iterator[Episode]:
    """The section's records as episodes, read as the write path asks for them (one batch ahead)."""
    for number, record in enumerate(records, 1):
        try:
            yield Episode.from_dict(record)
        except TypeError as exc:
            raise ThothError(f"bundle section {SECTION}: record {number}: not an episode: {exc}") from exc
