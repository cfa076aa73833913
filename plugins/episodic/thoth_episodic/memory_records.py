"""The episodic layer's memory records: a peer's episodes newest first, each deletable, with its earlier versions.

(`records.py` already holds the `Episode` model, so the hooks live here.) An episode's record is
the person's message as `text`, the reply and thread in `meta`; `history` holds the versions it
replaced (a reply cut short, replaced by the whole one when its turn was replayed). Episodes are
read-only: delete one as a `forget` reaction does (every version, and its text waiting for a
vector). Everything is scoped to the runtime's agent, the workspace and the peer: another peer's
id is None. A backend with `newest` and `versions` (both built-in ones) pages in SQL; another is
read through the `EpisodeStore` protocol.
"""

from __future__ import annotations

from itertools import islice
from typing import TYPE_CHECKING, Any

from thoth_core import MemoryRecord, hookimpl

from .memory import memory_for

if TYPE_CHECKING:
    from thoth_core import Runtime

    from .records import Episode, EpisodeStore

LAYER = "episodic"


def episode_record(episode: Episode) -> MemoryRecord:
    """An episode as a record: what the person said; the reply, thread and times in `meta`."""
    meta: dict[str, Any] = {
        "reply": episode.assistant,
        "summary": episode.summary,
        "thread": episode.thread,
        "session_id": episode.session_id,
        "turn_id": episode.turn_id,
        "model": episode.model,
        "agent": episode.agent,
        "recorded_at": episode.recorded_at,
        "superseded_at": episode.superseded_at,
        "cut_short": episode.cut_short,
    }
    return {
        "layer": LAYER,
        "kind": "episode",
        "id": episode.id,
        "text": episode.user,
        "at": float(episode.occurred_at),
        "editable": False,
        "deletable": True,
        "meta": meta,
    }


def newest(
    store: EpisodeStore, *, workspace: str, peer: str, agent: str, limit: int, before: float | None
) -> list[Episode]:
    """A peer's current episodes, newest first, at most `limit`, that happened before `before` (if given)."""
    paged = getattr(store, "newest", None)
    if paged is not None:
        return list(paged(workspace=workspace, peer=peer, agent=agent, limit=limit, before=before))
    held = [
        e
        for e in store.episodes(workspace=workspace, peer=peer, agent=agent)
        if before is None or e.occurred_at < before
    ]
    return held[::-1][:limit]


def mine(store: EpisodeStore, episode_id: str, *, workspace: str, peer: str, agent: str) -> Episode | None:
    """The current version of one of the peer's episodes (this agent's, this workspace's), or None."""
    episode = store.get(episode_id)
    if episode is None or (episode.workspace, episode.peer, episode.agent) != (workspace, peer, agent):
        return None
    return episode


@hookimpl
def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord] | None:
    if kind not in (None, "episode"):
        return None
    store = memory_for(runtime).store
    found = newest(store, workspace=workspace, peer=peer, agent=runtime.agent, limit=limit, before=before)
    return [episode_record(e) for e in found]


@hookimpl
def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    store = memory_for(runtime).store
    episode = mine(store, record_id, workspace=workspace, peer=peer, agent=runtime.agent)
    if episode is None:
        return None
    versions = getattr(store, "versions", None)
    earlier = [v for v in versions(record_id) if v.superseded_at is not None] if versions is not None else []
    return {**episode_record(episode), "history": [episode_record(v) for v in islice(earlier, 50)]}


@hookimpl
def delete_memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> bool | None:
    memory = memory_for(runtime)
    if mine(memory.store, record_id, workspace=workspace, peer=peer, agent=runtime.agent) is None:
        return None
    deleted = memory.store.delete(workspace=workspace, peer=peer, ids=[record_id])
    memory.queue.drop(lambda episode_id: episode_id == record_id)
    return True if deleted else None
