"""The blackboard's per-runtime state: its settings (`[plugins.blackboard]`) and each workspace's board."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .board import Board
from .roster import agent_ids

if TYPE_CHECKING:
    from thoth_core import Runtime

BACKENDS = ("sqlite", "memory", "redis")
CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {  # every key of [plugins.blackboard]; None: no default in the file
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


def settings_of(runtime: Runtime) -> Settings:
    """This runtime's blackboard settings; a bad value is a one-line config error."""
    return runtime.plugin_state("blackboard.settings", lambda: _settings(runtime))  # type: ignore[no-any-return]


def _settings(runtime: Runtime) -> Settings:
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


def board_for(runtime: Runtime, workspace: str | None = None) -> Board:
    """The board of one workspace (default: the configured one), made on first use."""
    workspace = workspace or runtime.config.get("thoth.workspace")
    return runtime.plugin_state(f"blackboard:{workspace}", lambda: _make_board(runtime, workspace))  # type: ignore[no-any-return]


def _make_board(runtime: Runtime, workspace: str) -> Board:
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
