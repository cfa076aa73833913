"""Blackboard plugin: a `blackboard` context block, `/board`, and `thoth board get|put|ls|watch`.

Config, `[plugins.blackboard]`: `backend` ("sqlite", default: `$THOTH_HOME/blackboard/board.db`;
"memory", in-process; or "redis"), `url` (Redis), `persist` (keep values past the ttl or, in
memory, past the process; default false), `ttl` (seconds a non-persistent SQLite or Redis
board lives after its last publish), `agent` (this process's agent id,
default the first in `persona/AGENTS.md`, else "thoth"), `subscriptions` (key patterns the
agent watches, e.g. ["task:*", "index:*"]; `agent:{id}:*` is always included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thoth_core import ContextBlock, hookimpl
from thoth_core.database import shared
from thoth_core.redact import redactor_of
from thoth_core.runtime import Command

from .board import Board, BoardError, matches
from .roster import agent_ids

LAYER = "working"
BACKENDS = ("sqlite", "memory", "redis")
CONFIG_DEFAULTS = {  # every key of [plugins.blackboard]; None: no default in the file
    "plugins.blackboard": {
        "backend": "sqlite",
        "url": None,
        "persist": False,
        "ttl": 86_400,
        "agent": None,
        "subscriptions": [],
    }
}


@dataclass(frozen=True)
class Settings:
    """`[plugins.blackboard]`, checked once per runtime."""

    backend: str
    url: str | None
    persist: bool
    ttl: int
    agent: str
    patterns: tuple[str, ...]


def settings_of(runtime: Any) -> Settings:
    """This runtime's blackboard settings; a bad value is a one-line config error."""
    return runtime.plugin_state("blackboard.settings", lambda: _settings(runtime))  # type: ignore[no-any-return]


def _settings(runtime: Any) -> Settings:
    options = {**CONFIG_DEFAULTS["plugins.blackboard"], **runtime.config.plugin("blackboard")}
    backend = options["backend"]
    if backend not in BACKENDS:
        raise runtime.config.error(
            "plugins.blackboard.backend", f"unknown backend {backend!r}; expected {', '.join(BACKENDS)}"
        )
    if backend == "redis" and not options.get("url"):
        raise runtime.config.error(
            "plugins.blackboard.url", "the redis backend needs a url, e.g. redis://127.0.0.1:6379/0"
        )
    subscriptions = options["subscriptions"]
    if not isinstance(subscriptions, list) or not all(isinstance(p, str) and p for p in subscriptions):
        raise runtime.config.error(
            "plugins.blackboard.subscriptions", f"expected a list of key patterns, got {subscriptions!r}"
        )
    if not isinstance(options["persist"], bool):
        raise runtime.config.error("plugins.blackboard.persist", f"expected true or false, got {options['persist']!r}")
    ttl = runtime.config.integer("plugins.blackboard.ttl", options["ttl"], low=1, high=10 * 365 * 86_400)
    roster = agent_ids(runtime.config.root / "persona" / "AGENTS.md")
    agent = str(options["agent"] or (roster[0] if roster else "thoth"))
    return Settings(
        backend, options["url"], options["persist"], ttl, agent, (f"agent:{agent}:*", *subscriptions),
    )  # fmt: skip


def board_for(runtime: Any, workspace: str | None = None) -> Board:
    """The board of one workspace (default: the configured one), made on first use."""
    workspace = workspace or runtime.config.get("thoth.workspace")
    return runtime.plugin_state(f"blackboard:{workspace}", lambda: _make_board(runtime, workspace))  # type: ignore[no-any-return]


def _make_board(runtime: Any, workspace: str) -> Board:
    settings = settings_of(runtime)
    if settings.backend == "redis":
        from .redis_board import RedisBoard

        assert settings.url is not None
        return RedisBoard(
            settings.url, namespace=f"thoth:board:{workspace}", ttl=None if settings.persist else settings.ttl
        )
    if settings.backend == "sqlite":
        from .sqlite_board import SqliteBoard

        return SqliteBoard(
            runtime.home / "blackboard" / "board.db", name=workspace, ttl=None if settings.persist else settings.ttl
        )
    from .memory import InProcessBoard

    return InProcessBoard(
        path=runtime.home / "blackboard" / f"{_file_name(workspace)}.json" if settings.persist else None
    )


def _file_name(workspace: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in workspace)


@hookimpl
def configure(runtime: Any) -> None:
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
def doctor_checks(runtime: Any) -> list[tuple[bool | None, str]] | None:
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


async def _board_command(args: str, runtime: Any, session: Any, **_: Any) -> str:
    verb, _, rest = args.strip().partition(" ")
    board = board_for(runtime, session.workspace)
    if verb in ("", "ls"):
        signals = await board.list(rest.strip())
        return "\n".join(f"{s.key} = {s.value}" for s in signals) or "the board is empty"
    if verb == "get":
        signal = await board.get(rest.strip())
        return f"{signal.key} = {signal.value}" if signal else f"{rest.strip()} is not set"
    if verb == "put":
        key, _, value = rest.strip().partition(" ")
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
