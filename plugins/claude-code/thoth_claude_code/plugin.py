"""The `claude-code` frontend: Claude Code's hooks bring this agent's memory into its sessions.

`thoth claude-code install` writes the hooks into `.claude/settings.json`; Claude Code then runs
`thoth claude-code hook EVENT` at SessionStart, UserPromptSubmit, Stop and SessionEnd.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import hookimpl

from .settings import DEFAULTS, NAME, Settings

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.scope import Scope

LAYER = "frontend"  # not a memory layer: it contributes no context of its own
CONFIG_DEFAULTS = {f"plugins.{NAME}": dict(DEFAULTS)}


@hookimpl
def configure(runtime: Runtime) -> None:
    Settings.of(runtime.config)


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .commands import claude_code

    cli.add_command(claude_code)


@hookimpl(optionalhook=True)  # declared by thoth-serve (`serve_routes`); ignored where it is not installed
def serve_routes(register: Any, runtime: Runtime, scope: Scope) -> None:
    """The warm hooks' route on `thoth serve`: POST /claude-code/hook/EVENT (see warm.py)."""
    from .warm import hook_route

    register(hook_route(runtime, scope))
