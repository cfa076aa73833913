"""Working memory's part of `thoth bundle`: each stored session's index row and its transcript."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from thoth_core import BundleSection, ThothError, hookimpl

from .state import state
from .store import FIELDS, StoredSession

if TYPE_CHECKING:
    from thoth_core import Runtime

SECTION = "working"
SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")  # it names the transcript file
VERSION = 1


@hookimpl
def bundle_export(runtime: Runtime) -> BundleSection:
    """Every session (`{"session": index row, "transcript": [entries]}`), oldest first."""
    store = state(runtime).store
    sessions = store.every()

    def records() -> Iterator[dict[str, Any]]:
        for row in sessions:
            yield {"session": dataclasses.asdict(row), "transcript": store.entries(row.session_id, row.started_at)}

    return {"name": SECTION, "version": VERSION, "count": len(sessions), "records": records()}


@hookimpl
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add the sessions not held yet (by id), each with its transcript."""
    from thoth_core.bundle import own_section

    if not own_section(section, SECTION, VERSION):
        return None
    store = state(runtime).store
    added = {"sessions": 0, "transcripts": 0}
    for number, record in enumerate(section["records"], 1):
        try:
            fields = record["session"]
            row = StoredSession(**{k: fields[k] for k in FIELDS if k in fields})  # an older bundle has no agent
            if not SESSION_ID.fullmatch(str(row.session_id)) or not isinstance(row.started_at, int | float):
                raise TypeError(f"bad session_id {row.session_id!r} or started_at {row.started_at!r}")
        except (KeyError, TypeError) as exc:
            raise ThothError(f"bundle section {SECTION}: record {number}: not a stored session: {exc}") from exc
        transcript = record.get("transcript") or []
        if store.add(row, transcript):
            added["sessions"] += 1
            added["transcripts"] += bool(transcript)
        progress(1)
    return added
