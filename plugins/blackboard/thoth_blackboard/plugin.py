"""Blackboard plugin: a `blackboard` context block, `/board`, and `thoth board get|put|ls|watch`.

Config, `[plugins.blackboard]`: `backend` ("sqlite", default: `$THOTH_HOME/blackboard/board.db`;
"memory", in-process; or "redis"), `url` (Redis), `persist` (keep values past the ttl or, in
memory, past the process; default false), `ttl` (seconds a non-persistent SQLite or Redis
board lives after its last publish), `agent` (this process's agent id,
default the first in `persona/AGENTS.md`, else "thoth"), `subscriptions` (key patterns the
agent watches, e.g. ["task:*", "index:*"]; `agent:{id}:*` is always included).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import Command, ContextBlock, DoctorLine, Session, hookimpl
from thoth_core.database import shared
from thoth_core.redact import redactor_of

from .board import BoardError, matches
from .records import memory_record as memory_record  # hookimpls: registered with this module
from .records import memory_records as memory_records
from .roster import agent_ids
from .state import CONFIG_DEFAULTS as CONFIG_DEFAULTS  # the core reads CONFIG_DEFAULTS here
from .state import board_for, settings_of

if TYPE_CHECKING:
    from thoth_core import Runtime

LAYER = "working"
@hookimpl
def configure(runtime: Runtime) -> None:
    """Check `[plugins.blackboard]` at start-up; the board itself opens on first use."""
    settings_of(runtime)


@hookimpl
async def pre_spawn_context(session):  # type: ignore[no-untyped-def]
    settings = settings_of(session.runtime)
    board = board_for(session.runtime, session.workspace)
    signals = []
    for prefix in sorted({p[:-1] if p.endswith("*") else p for p in settings.patterns}):
        signals += [s for s in await board.list(prefix) if any(matches(s.key, p) for p in settings.patterns)]
    unique = {s.key: s for s in signals}
    if not unique:
        return None
    lines = [f"{s.key} = {s.value}" + (f"  (from {s.publisher})" if s.publisher else "") for s in unique.values()]
    return ContextBlock(tag="blackboard", text="Signals you subscribed to:\n" + "\n".join(lines), priority=30)


@hookimpl
def doctor_checks(runtime: Runtime) -> list[DoctorLine] | None:
    """A warning when the home shares a store (`[storage] url`) but the board is this host's own (no Redis)."""
    if not shared(runtime.config):
        return None
    settings = settings_of(runtime)
    if settings.backend == "redis":
        return [(True, "blackboard: shared by every host (redis)")]
    where = runtime.home / "blackboard" / "board.db" if settings.backend == "sqlite" else "this process's memory"
    return [
        (
            None,
            f"blackboard: kept on this host only ({settings.backend}, {where}) while [storage] url is shared; other "
            'hosts see none of its signals: set [plugins.blackboard] backend = "redis" and url to share it',
        )
    ]


async def _board_command(args: str, runtime: Runtime, session: Session, **_: Any) -> str:
    verb, _sep, rest = args.strip().partition(" ")
    board = board_for(runtime, session.workspace)
    if verb in ("", "ls"):
        signals = await board.list(rest.strip())
        return "\n".join(f"{s.key} = {s.value}" for s in signals) or "the board is empty"
    if verb == "get":
        signal = await board.get(rest.strip())
        return f"{signal.key} = {signal.value}" if signal else f"{rest.strip()} is not set"
    if verb == "put":
        key, _sep, value = rest.strip().partition(" ")
        value = redactor_of(runtime).redact(value)  # a signal is kept and shared: the runtime's `[privacy]` applies
        signal = await board.publish(key, value, publisher=session.peer)
        return f"published {signal.key} = {signal.value}"
    if verb == "agents":
        return ", ".join(agent_ids(runtime.config.root / "persona" / "AGENTS.md")) or "no roster in persona/AGENTS.md"
    return "usage: /board [ls PREFIX | get KEY | put KEY VALUE | agents]"


@hookimpl
def register_commands(register):  # type: ignore[no-untyped-def]
    register(
        Command(
            "board",
            "read or write the shared blackboard",
            _board_command,
            usage="[ls PREFIX | get KEY | put KEY VALUE | agents]",
        )
    )


@hookimpl
async def layer_status(workspace, runtime):  # type: ignore[no-untyped-def]
    try:
        return {"layer": LAYER, "signals": len(await board_for(runtime, workspace).list())}
    except BoardError:
        return {"layer": LAYER, "signals": "unreachable"}


@hookimpl
async def forget(peer, thread, workspace, runtime):  # type: ignore[no-untyped-def]
    """Delete the signals the peer published on the workspace's board (signals have no thread: whole forgets only)."""
    if thread is not None:
        return None
    board = board_for(runtime, workspace)
    erase = getattr(board, "forget", None)  # only the SQLite board can forget one publisher
    receipt = await erase(peer) if erase is not None else {}
    return {what: n for what, n in receipt.items() if n} or None


@hookimpl
def register_cli_commands(cli):  # type: ignore[no-untyped-def]
    from .cli import board

    cli.add_command(board)
