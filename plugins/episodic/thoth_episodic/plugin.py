"""L3 episodic memory: every answered turn becomes an episode; related ones come back later."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from thoth_core import ContextBlock, ThothError, hookimpl
from thoth_core.schema import Choice, Number, Text

from .bundle import bundle_export as bundle_export  # hookimpls: registered with this module
from .bundle import bundle_import as bundle_import
from .embedder import MINILM_OPTIONS
from .memory import NAME, STORE_OPTIONS, Settings, memory_for
from .memory_records import delete_memory_record as delete_memory_record  # hookimpls: registered with this module
from .memory_records import memory_record as memory_record
from .memory_records import memory_records as memory_records
from .related import related_block

if TYPE_CHECKING:
    from collections.abc import Callable

    import click

    from thoth_core import Runtime
    from thoth_core.types import Reply, Session, Turn

LAYER = "episodic"
RETIRE_EVERY = 3600.0
# Every key of [plugins.episodic] the layer, its backends and its embedder read (the core refuses others).
# A third-party backend or embedder declares its own keys the same way: {"plugins.episodic": {...}}.
# backend: None (no fixed default): sqlite, or postgres with `[storage] url` (Settings.from_config).
CONFIG_DEFAULTS = {f"plugins.{NAME}": {**vars(Settings()), **STORE_OPTIONS, **MINILM_OPTIONS, "backend": None}}


class _AnnMode:
    """`ann`: "auto", "exact" or "usearch"; "hnsw" too on the postgres backend (the default with `[storage] url`)."""

    def check(self, config: Any, key: str, value: Any) -> None:
        backend = config.get(f"plugins.{NAME}.backend") or ("postgres" if config.get("storage.url") else "sqlite")
        Choice("auto", "exact", "usearch", *(["hnsw"] if backend == "postgres" else [])).check(config, key, value)


# What the backends and the embedder read only when they first open: checked at start instead (thoth_core.schema).
CONFIG_SCHEMA = {
    f"plugins.{NAME}": {
        "ann": _AnnMode(),
        "synchronous": Choice("NORMAL", "FULL", "EXTRA", any_case=True),
        "ann_min_rows": Number(high=1e9, integer=True),
        "ann_expansion": Number(low=1, high=4096, integer=True),
        "path": Text(),
        "batch_size": Number(low=1, high=4096, integer=True),
        "batch_tokens": Number(low=1, high=1_000_000, integer=True),
        "max_tokens": Number(low=1, high=512, integer=True),
        "threads": Number(high=1024, integer=True),
    }
}


@hookimpl
def configure(runtime: Runtime) -> None:
    """Validate `[plugins.episodic]` at start-up (nothing is opened or loaded yet)."""
    memory_for(runtime)


@hookimpl
def register_episodic_backends(register: Callable[..., None]) -> None:
    """The built-in backends: sqlite (default) and postgres (pgvector; the default when `[storage] url` is set)."""
    from .postgres_store import postgres_backend
    from .sqlite_store import sqlite_backend

    register("sqlite", sqlite_backend)
    register("postgres", postgres_backend)


@hookimpl
def register_embedders(register: Callable[..., None]) -> None:
    """The built-in embedder: all-MiniLM-L6-v2 int8 on onnxruntime."""
    from .embedder import minilm

    register("minilm", minilm)


@hookimpl
def session_start(session: Session) -> None:
    """Start loading the embedder when the session's first turn recalls, so that turn does not wait for the model.

    A resumed session (the working layer restored its history) recalls nothing on its next turn;
    loading the model then would only compete with the provider's SDK import and delay a one-shot
    `thoth ask` (by ~0.3 s here). Its turns are embedded after the reply.
    """
    assert session.runtime is not None  # the runtime calls session hooks with its own sessions
    memory_for(session.runtime).warm_up(session)


@hookimpl
def post_turn_write(turn: Turn, reply: Reply, session: Session) -> None:
    """Store the answered turn as an episode (runs after the reply was sent)."""
    if reply.error or turn.error:
        return
    assert session.runtime is not None
    memory = memory_for(session.runtime)
    memory.write(memory.episode_of(turn, reply, session))
    if time.time() - memory.last_retire > RETIRE_EVERY:
        memory.retire()


@hookimpl
def pre_spawn_context(turn: Turn, session: Session) -> ContextBlock | None:
    """The top related past episodes of this peer and workspace: on a thread's first turn, or every turn."""
    assert session.runtime is not None
    return related_block(memory_for(session.runtime), turn, session)


@hookimpl
def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[dict[str, Any]]:
    """The peer's episodes related to a query (hybrid: dense and BM25), with why each matched."""
    hits = memory_for(runtime).recall(query, workspace=workspace, peer=peer, k=limit)
    return [
        {
            "layer": LAYER,
            "kind": "episode",
            "id": hit.episode.id,
            "text": hit.episode.user or hit.episode.summary,
            "reply": hit.episode.summary or hit.episode.assistant,
            "thread": hit.episode.thread,
            "score": round(hit.score, 4),
            "why": hit.why(),
            "dense": hit.dense,  # unrounded: `thoth recall` through a service prints it as in-process
            "at": hit.episode.occurred_at,
        }
        for hit in hits
    ]


@hookimpl
def register_cli_commands(cli: click.Group) -> None:
    """`thoth episodes list|search|export|import|reindex`."""
    from .cli import episodes

    cli.add_command(episodes)


@hookimpl
def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime) -> dict[str, int] | None:
    """Delete the peer's episodes (or one thread's); every version goes, and their texts waiting for a vector."""
    memory = memory_for(runtime)
    deleted = memory.store.delete(workspace=workspace, peer=peer, thread=thread)
    if deleted:
        memory.queue.drop(lambda episode_id: memory.store.get(episode_id) is None)
    return {"episodes": deleted} if deleted else None


@hookimpl
def feedback(kind: str, turn_id: str, session: Session) -> dict[str, Any] | None:
    """A `forget` reaction deletes that turn's episode."""
    if kind != "forget":
        return None
    assert session.runtime is not None
    store = memory_for(session.runtime).store
    episode = store.find_turn(turn_id)
    if episode is None or episode.workspace != session.workspace:
        return None
    deleted = store.delete(workspace=episode.workspace, ids=[episode.id])
    return {"episodes": deleted, "message": f"forgot the episode of turn {turn_id}"}


@hookimpl
def layer_status(workspace: str, peer: str, runtime: Runtime) -> dict[str, Any]:
    """How many episodes this peer has, and which embedder recall uses."""
    memory = memory_for(runtime)
    return {
        "layer": LAYER,
        "backend": memory.settings.backend,
        "episodes": memory.store.count(workspace=workspace, peer=peer, agent=runtime.agent),
        "embedder": memory.embedder_name,
    }


@hookimpl
def doctor_checks(runtime: Runtime) -> list[tuple[bool, str]]:
    """The configured backend opens and answers a search; then its own checks (SQLite: its ANN index file)."""
    memory = memory_for(runtime)
    try:
        memory.check_backend()
    except ThothError as exc:
        return [(False, f"episodic: {exc}")]
    found = [(True, f"episodic: backend {memory.settings.backend!r} opens and answers a search")]
    checks = getattr(memory.store, "index_checks", None)
    return found + (checks() if checks is not None else [])


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
def expiring_records(before: float, runtime: Runtime) -> list[dict[str, Any]]:
    """Episodes before `before` (the caller's now minus `retention_days`) not yet consolidated.

    `text` is the turn without its speaker: the peer is its own field, and the nightly job writes it in front.
    """
    memory = memory_for(runtime)
    cutoff = memory.cutoff(before)
    if cutoff is None:
        return []
    return [
        {
            "id": e.id,
            "plugin": NAME,
            "at": e.occurred_at,
            "peer": e.peer,
            "workspace": e.workspace,
            "thread": e.thread,
            "text": f"{e.user}\nagent: {e.assistant}" if e.assistant else e.user,
        }
        for e in memory.store.expiring(cutoff)
    ]


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
def records_consolidated(ids: list[str], runtime: Runtime) -> None:
    """Mark the absorbed episodes; those past retention are deleted now."""
    memory = memory_for(runtime)
    memory.store.mark_consolidated(ids)
    memory.retire()
