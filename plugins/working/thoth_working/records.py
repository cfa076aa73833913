"""The working layer's memory records: a peer's stored sessions, each with its transcript; read-only.

A session's record is `session:<id>`; its `text` is the transcript (one `user:`/`agent:` pair per
turn, tool calls and errors on their own lines), its `at` the last activity. `memory_record` adds
the entries themselves in `meta["entries"]`. Only the runtime's agent's sessions of the peer are
shown; another peer's id is None.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import MemoryRecord, hookimpl

from .state import state
from .store import SessionStore, StoredSession
from .transcripts import one_per_turn

if TYPE_CHECKING:
    from thoth_core import Runtime

LAYER = "working"
PREFIX = "session:"


def transcript_text(entries: list[dict[str, Any]]) -> str:
    """A transcript as lines a person reads: each turn's message and reply, tool calls, errors."""
    lines: list[str] = []
    for entry in one_per_turn(entries):
        kind = entry.get("type")
        if kind == "turn":
            lines += [f"user: {entry.get('user', '')}", f"agent: {entry.get('assistant', '')}"]
        elif kind == "tool":
            lines.append(f"tool {entry.get('name', '?')} ({entry.get('plugin', '?')})")
        elif kind == "error":
            lines.append(f"error: {entry.get('error', '')}")
    return "\n".join(lines)


def session_record(store: SessionStore, row: StoredSession, *, entries: bool = False) -> MemoryRecord:
    """A stored session as a record, its transcript as text (with `entries`: the entries too, in `meta`)."""
    held = store.entries(row.session_id, row.started_at)
    meta: dict[str, Any] = {
        "thread": row.thread,
        "started_at": row.started_at,
        "turns": row.turns,
        "closed": row.closed,
        "agent": row.agent,
    }
    if entries:
        meta["entries"] = one_per_turn(held)
    return {
        "layer": LAYER,
        "kind": "session",
        "id": f"{PREFIX}{row.session_id}",
        "text": transcript_text(held),
        "at": float(row.last_active),
        "editable": False,
        "meta": meta,
    }


@hookimpl
def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord] | None:
    if kind not in (None, "session"):
        return None
    store = state(runtime).store
    rows = store.sessions_of(workspace, peer, agent=runtime.agent, limit=limit, before=before)
    return [session_record(store, row) for row in rows]


@hookimpl
def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    if not record_id.startswith(PREFIX):
        return None
    store = state(runtime).store
    row = store.get(record_id[len(PREFIX) :])
    if row is None or (row.workspace, row.peer, row.agent) != (workspace, peer, runtime.agent):
        return None
    return {**session_record(store, row, entries=True), "history": []}
