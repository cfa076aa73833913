"""The memory tools in every turn: `recall`, `remember`, `correct`, and Claude's own `memory` tool where it runs.

Offered to a provider that runs tools (its `tool_types`: the `anthropic` and `openai` providers;
Claude's `memory` tool to `anthropic` only). Switched off as any plugin is (`[plugins] disabled =
["memory_tools"]`); Claude's tool alone with `[plugins.memory_tools] memory_tool = false`. What each
tool does is `thoth_core.memory_tools` and `thoth_core.memory_files`; how far a turn's calls may go
is `thoth_core.tools` (`[thoth] tool_calls`, `tool_seconds`, `[budget] tools`).
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from thoth_core import hookimpl
from thoth_core.memory_files import TOOL, MemoryFiles
from thoth_core.memory_tools import NAMES, SCHEMAS, SETTINGS, ToolSettings, run_tool
from thoth_core.schema import Number
from thoth_core.types import Session, Turn
from thoth_core.write_policy import TIERS

NAME = SETTINGS
DEFAULTS: dict[str, Any] = {
    "memory_tool": True,  # Claude's `memory_20250818` tool, when the anthropic provider runs
    **{key: list(value) if isinstance(value, tuple) else value for key, value in asdict(ToolSettings()).items()},
}
CONFIG_DEFAULTS = {f"plugins.{NAME}": DEFAULTS}
CONFIG_SCHEMA = {
    f"plugins.{NAME}": {
        "recall_limit": Number(low=1, high=20, integer=True),
        "result_tokens": Number(low=50, high=100_000, integer=True),
        "max_chars": Number(low=1, high=100_000, integer=True),
    }
}


@hookimpl
def configure(runtime: Any) -> None:
    """Refuse a tier the write policy does not know, naming the key."""
    table = runtime.config.section(f"plugins.{NAME}")
    for key in ("auto_apply", "correct_auto_apply"):
        unknown = [tier for tier in table.get(key, []) if tier not in TIERS]
        if unknown:
            known = ", ".join(TIERS)
            raise runtime.config.error(f"plugins.{NAME}.{key}", f"unknown tier {unknown[0]!r}; one of {known}")


@hookimpl
def turn_tools(turn: Turn, session: Session) -> list[dict[str, Any]] | None:
    """The memory tools, and Claude's memory tool (the runtime gives a model only the tool types it runs)."""
    runtime = session.runtime
    assert runtime is not None  # the runtime calls session hooks with its own sessions
    settings = ToolSettings.of(runtime)
    tools: list[dict[str, Any]] = [
        dict(SCHEMAS[name], handler=_handler(runtime, name, turn, session, settings)) for name in NAMES
    ]
    if runtime.config.section(f"plugins.{NAME}").get("memory_tool", True):  # the runtime offers it where it runs
        files = MemoryFiles(runtime, turn, session, settings)

        async def memory(command: Any) -> str:
            return await files(command)

        tools.append(dict(TOOL, handler=memory))
    return tools


def _handler(runtime: Any, name: str, turn: Turn, session: Session, settings: ToolSettings) -> Any:
    async def handle(tool_input: Any) -> str:
        return await run_tool(runtime, name, tool_input, turn=turn, session=session, settings=settings)

    return handle
