"""What the API's memory routes do, through the runtime's public API only, for one peer at a time.

Nothing here knows HTTP: each function takes the runtime and an already-scoped peer and
workspace, and returns plain JSON-ready data; bad input raises a ThothError of one line.
"""

from __future__ import annotations

import copy
import json
from typing import TYPE_CHECKING, Any

from thoth_core.errors import ThothError
from thoth_core.memory_tools import ToolSettings, run_tool
from thoth_core.scope import valid_name
from thoth_core.types import Turn

if TYPE_CHECKING:
    from thoth_core import Runtime

DEFAULT_THREAD = "api"
MAX_K = 50


def jsonable(value: Any) -> Any:
    """The value with everything JSON cannot hold turned into strings."""
    return json.loads(json.dumps(value, default=str))


def one_line(text: object) -> str:
    """Text folded onto one line (error messages)."""
    return " ".join(str(text).split())


def thread_for(requested: str | None) -> str:
    """The thread a write goes to: the one named, else `api`."""
    return DEFAULT_THREAD if not requested else valid_name("thread", requested)


async def recall(
    runtime: Runtime, *, peer: str, workspace: str, query: str, k: int, layer: str | None = None
) -> dict[str, Any]:
    """Every layer's hits for the query (or one layer's), with why each matched, and which plugins failed."""
    if not query.strip():
        raise ThothError("q: required, a non-empty query")
    found = await runtime.recall(query=query, peer=peer, workspace=workspace, limit=k, layer=layer)
    return dict(jsonable(found.as_dict()))


async def remember(runtime: Runtime, *, peer: str, workspace: str, text: str, thread: str) -> dict[str, Any]:
    """Keep a hard fact or a note about the peer, as `/remember` does."""
    if "remember" not in runtime.commands:
        raise ThothError("/remember is not available: no enabled plugin offers it (the identity layer does)")
    session = await runtime.session(peer=peer, thread=thread, workspace=workspace)
    turn = Turn(f"/remember {text}", peer, thread, session.workspace)
    reply = await runtime.run_command("remember", text, turn, session)
    answer = reply.text.strip()
    if reply.error or answer.startswith(("/remember:", "/remember failed", "usage:")):
        raise ThothError(one_line(reply.error or answer))
    return {"answer": answer, "peer": peer, "workspace": session.workspace, "thread": thread}


async def tool(
    runtime: Runtime, *, name: str, tool_input: dict[str, Any], peer: str, workspace: str, thread: str
) -> dict[str, Any]:
    """Run one memory tool for the peer as a turn's model does (`thoth_core.memory_tools`); its answer."""
    session = await runtime.session(peer=peer, thread=thread, workspace=workspace)
    turn = Turn("", peer, thread, session.workspace)
    text = await run_tool(runtime, name, tool_input, turn=turn, session=session, settings=ToolSettings.of(runtime))
    return {"tool": name, "peer": peer, "workspace": session.workspace, "text": text}


async def context(runtime: Runtime, *, peer: str, workspace: str, message: str, thread: str) -> dict[str, Any]:
    """The context a turn with this message would get (as `thoth context --json`); no model call."""
    session = await runtime.session(peer=peer, thread=thread, workspace=workspace)
    probe = copy.copy(session)  # plugins may consume scratch entries (a chosen /skill) while assembling
    probe.scratch = dict(session.scratch)
    assembly = await runtime.context(Turn(message, peer, thread, session.workspace), probe)
    out = {"peer": peer, "workspace": session.workspace, "thread": thread, "system": assembly.system}
    return dict(jsonable(out | assembly.as_dict()))


async def forget(runtime: Runtime, *, peer: str, workspace: str, thread: str | None, confirm: bool) -> dict[str, Any]:
    """Delete the peer's data (or one thread of it) in every layer; only with confirm true. The receipt."""
    thread = valid_name("thread", thread) if thread else None
    if confirm is not True:
        where = f"peer {peer}" + (f", thread {thread}" if thread else "") + f" in workspace {workspace}"
        raise ThothError(f"confirm: must be true to forget {where}; this deletes it in every layer, for good")
    receipt = jsonable(await runtime.forget(peer=peer, thread=thread, workspace=workspace))
    return {"peer": peer, "workspace": workspace, "thread": thread, "receipt": receipt}


async def approvals(runtime: Runtime, *, peer: str, workspace: str) -> list[dict[str, Any]]:
    """The pending items the approvals policy lets this peer see, without server-side paths."""
    items = await runtime.approvals(actor=peer, workspace=workspace)
    return [jsonable({k: v for k, v in item.items() if k != "path"}) for item in items]


__all__ = [
    "DEFAULT_THREAD",
    "MAX_K",
    "approvals",
    "context",
    "forget",
    "jsonable",
    "one_line",
    "recall",
    "remember",
    "thread_for",
    "tool",
]
