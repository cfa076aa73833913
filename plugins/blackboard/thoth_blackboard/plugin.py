"""Blackboard plugin: a `blackboard` context block, `/board`, and `thoth board get|put|ls|watch`.

Config, `[plugins.blackboard]`: `backend` ("memory", default, or "redis"), `url` (Redis),
`persist` (keep values past the session/process; default false), `ttl` (seconds a
non-persistent Redis board lives after its last publish), `agent` (this process's agent id,
default the first in `persona/AGENTS.md`, else "thoth"), `subscriptions` (key patterns the
agent watches, e.g. ["task:*", "index:*"]; `agent:{id}:*` is always included).
"""

from __future__ import annotations

from typing import Any

from thoth_core import ContextBlock, hookimpl
from thoth_core.runtime import Command

from .board import Board, BoardError, matches
from .roster import agent_ids

LAYER = "working"


def board_for(runtime: Any) -> Board:
    """This runtime's board, made from config on first use."""
    return runtime.plugin_state("blackboard", lambda: _make_board(runtime))  # type: ignore[no-any-return]


def _make_board(runtime: Any) -> Board:
    options = runtime.config.plugin("blackboard")
    backend = options.get("backend", "memory")
    workspace = runtime.config.get("thoth.workspace")
    persist = bool(options.get("persist", False))
    if backend == "memory":
        from .memory import InProcessBoard

        return InProcessBoard(path=runtime.home / "blackboard" / f"{workspace}.json" if persist else None)
    if backend == "redis":
        from .redis_board import RedisBoard

        if not options.get("url"):
            raise runtime.config.error(
                "plugins.blackboard.url", "the redis backend needs a url, e.g. redis://127.0.0.1:6379/0"
            )
        return RedisBoard(
            options["url"],
            namespace=f"thoth:board:{workspace}",
            ttl=None if persist else int(options.get("ttl", 86_400)),
        )
    raise runtime.config.error("plugins.blackboard.backend", f"unknown backend {backend!r}; expected memory or redis")


def agent_of(runtime: Any) -> str:
    """The agent id this process speaks as."""
    configured = runtime.config.plugin("blackboard").get("agent")
    roster = agent_ids(runtime.config.root / "persona" / "AGENTS.md")
    return str(configured or (roster[0] if roster else "thoth"))


def subscriptions_of(runtime: Any) -> list[str]:
    """Key patterns the agent watches."""
    return [f"agent:{agent_of(runtime)}:*", *runtime.config.plugin("blackboard").get("subscriptions", [])]


@hookimpl
async def pre_spawn_context(session):  # type: ignore[no-untyped-def]
    runtime = session.runtime
    signals = [s for s in await board_for(runtime).list() if any(matches(s.key, p) for p in subscriptions_of(runtime))]
    if not signals:
        return None
    lines = [f"{s.key} = {s.value}" + (f"  (from {s.publisher})" if s.publisher else "") for s in signals]
    return ContextBlock(tag="blackboard", text="Signals you subscribed to:\n" + "\n".join(lines), priority=30)


async def _board_command(args: str, runtime: Any, session: Any, **_: Any) -> str:
    verb, _, rest = args.strip().partition(" ")
    board = board_for(runtime)
    if verb in ("", "ls"):
        signals = await board.list(rest.strip())
        return "\n".join(f"{s.key} = {s.value}" for s in signals) or "the board is empty"
    if verb == "get":
        signal = await board.get(rest.strip())
        return f"{signal.key} = {signal.value}" if signal else f"{rest.strip()} is not set"
    if verb == "put":
        key, _, value = rest.strip().partition(" ")
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
async def layer_status(runtime):  # type: ignore[no-untyped-def]
    try:
        return {"layer": "blackboard", "signals": len(await board_for(runtime).list())}
    except BoardError:
        return {"layer": "blackboard", "signals": "unreachable"}


@hookimpl
def register_cli_commands(cli):  # type: ignore[no-untyped-def]
    from .cli import board

    cli.add_command(board)
