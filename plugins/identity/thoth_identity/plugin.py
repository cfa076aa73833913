"""L2 identity memory: a `user-model` block before each model call, ingest after each turn.

The backend is the embedded one (SQLite in `$THOTH_HOME/identity/`, or the shared PostgreSQL of
`[storage] url`) unless `[plugins.identity]` names a Honcho `base_url`. `HONCHO_DISABLED=true`
switches the layer off (the core blocks it).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any, cast

from thoth_core import Command, ContextBlock, RecallHit, Reply, Session, Turn, hookimpl

from .bundle import bundle_export as bundle_export  # hookimpls: registered with this module
from .bundle import bundle_import as bundle_import
from .layer import backend_async, layer_for
from .layer import backend_for as backend_for  # this runtime's backend, for frontends and tests
from .recall import recall_items
from .records import delete_memory_record as delete_memory_record  # hookimpls: registered with this module
from .records import edit_memory_record as edit_memory_record
from .records import memory_record as memory_record
from .records import memory_records as memory_records
from .settings import CONFIG_DEFAULTS as CONFIG_DEFAULTS  # the core reads it here: the table's keys

if TYPE_CHECKING:
    from thoth_core import Runtime

    from .honcho_backend import HonchoBackend

LAYER = "identity"
DEADLINE = 1.5

logger = logging.getLogger(__name__)


@hookimpl
def configure(runtime: Runtime) -> None:
    """Check `[plugins.identity]` and start the warm-up (imports, model) in a thread; the store opens on first use."""
    logger.debug("identity: %s backend", layer_for(runtime).settings.backend)


@hookimpl
async def pre_spawn_context(turn: Turn, session: Session) -> ContextBlock | None:
    assert session.runtime is not None  # the runtime calls session hooks with its own sessions
    return await layer_for(session.runtime).context(turn, session)


@hookimpl
async def post_turn_write(turn: Turn, reply: Reply, session: Session) -> None:
    assert session.runtime is not None
    await (await backend_async(session.runtime)).ingest(turn, reply, session)


@hookimpl
async def session_end(session: Session) -> None:
    """Derive the peer's waiting turns (`derive_at_session_end`; the embedded backend, Honcho derives itself)."""
    assert session.runtime is not None
    await (await backend_async(session.runtime)).session_end(session)


@hookimpl
async def feedback(kind: str, turn_id: str, text: str, actor: str, session: Session) -> dict[str, Any] | None:
    if kind not in ("identity", "remember") or not text.strip():
        return None
    assert session.runtime is not None
    backend = await backend_async(session.runtime)
    outcome = await asyncio.to_thread(
        backend.note_reaction, session.workspace, session.peer, text, turn_id=turn_id, actor=actor
    )
    return {"action": outcome["kind"], "message": outcome["message"]}


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
async def reflection_result(result: dict[str, Any], session: Session) -> None:
    assert session.runtime is not None
    backend = await backend_async(session.runtime)
    flagged = (result.get("flags") or {}).get("user_model_updates") or {}
    source = f"reflection:{result.get('run_id') or session.id}"
    for peer, texts in (result.get("user_model_updates") or {}).items():
        held = flagged.get(peer) or {}
        kept = [t for i, t in enumerate(texts) if str(i) not in held and isinstance(t, str)]
        if len(kept) < len(texts):
            logger.info("identity: %d flagged update(s) about %s not applied", len(texts) - len(kept), peer)
        if kept:
            await asyncio.to_thread(
                backend.add_observations, session.workspace, peer, kept, author="agent", source=source
            )


@hookimpl
async def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime, wait: float) -> dict[str, int] | None:
    backend = await backend_async(runtime)
    receipt = await asyncio.to_thread(backend.forget, workspace, peer, thread, wait=wait)
    return {what: n for what, n in receipt.items() if n or what.endswith("_left")} or None  # 0 left is news


@hookimpl
async def layer_status(workspace: str, peer: str, runtime: Runtime) -> dict[str, Any]:
    return await asyncio.to_thread((await backend_async(runtime)).status, workspace, peer)


async def _remember(args: str, session: Session, runtime: Runtime, **_: Any) -> str:
    """Facts (read by the model when one is configured, within `remember_timeout`, else by rule) or a note."""
    if not args.strip():
        return REMEMBER_USAGE
    backend = await backend_async(runtime)
    text = backend.remember_text(args)  # a secret never reaches the model
    from .extract import read_with_model  # its pydantic schemas load when first asked for, not on every start

    timeout = layer_for(runtime).settings.remember_timeout
    reading = await read_with_model(runtime, text, peer=session.peer, timeout=timeout)
    read: dict[str, Any] = {"facts": reading.facts, "complete": reading.complete} if reading else {}
    outcome = await asyncio.to_thread(
        backend.remember, session.workspace, session.peer, text, source=f"command:{session.id}", **read
    )
    return str(outcome["message"])


REMEMBER_USAGE = (
    "usage: /remember TEXT - a fact about you (`my name is Ada`, `I work at Acme`, `I live in Oslo`, "
    "`I prefer short answers`, `my sister Ann lives in Oslo`, `timezone: CET`) or any note about you"
)


@hookimpl
async def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[RecallHit]:
    """The peer's facts and observations matching a query."""
    store = (await backend_async(runtime)).store
    return await asyncio.to_thread(
        recall_items, store, runtime.meaning, workspace=workspace, peer=peer, query=query, limit=limit
    )


@hookimpl
def doctor_checks(runtime: Runtime) -> list[tuple[bool, str]] | None:
    """Honcho reachable, the key accepted, the server's version one this SDK speaks (the honcho backend only)."""
    layer = layer_for(runtime)
    if layer.settings.backend != "honcho":
        return None
    from .checks import honcho_checks

    return honcho_checks(layer.settings, cast("HonchoBackend", layer.backend()))  # the honcho backend, checked above


async def _correct(args: str, session: Session, runtime: Runtime, **_: Any) -> str:
    from .corrections import correct, held_items

    store = (await backend_async(runtime)).store
    item, _sep, text = args.strip().partition(" ")
    if not item:
        held = await asyncio.to_thread(held_items, store, session.workspace, session.peer)
        lines = [f"{i['id']}  {i['text']}" for i in held] or ["Nothing is held about you."]
        return "\n".join([*lines, CORRECT_USAGE])
    change = None if text.strip().lower() == "delete" else text
    mine = {"workspace": session.workspace, "peer": session.peer, "actor": f"peer:{session.peer}"}
    return str(await asyncio.to_thread(correct, store, runtime, item=item, text=change, **mine))


CORRECT_USAGE = "usage: /correct ID NEW TEXT (a fact keeps its old value as history) or /correct ID delete"


@hookimpl
def register_commands(register: Any) -> None:
    register(Command("remember", "remember a fact or a note about you", _remember, usage="TEXT"))
    register(
        Command("correct", "see what is held about you; fix or delete one item", _correct, usage="[ID TEXT|delete]")
    )


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import identity

    cli.add_command(identity)
