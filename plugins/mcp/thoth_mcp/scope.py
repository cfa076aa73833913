"""The thread an MCP write goes to; peer and workspace rules are the core's (`thoth_core.scope`)."""

from __future__ import annotations

from thoth_core.scope import valid_name

DEFAULT_THREAD = "mcp"


def thread_for(requested: str | None) -> str:
    """The thread a write goes to: the one named, else `mcp`."""
    return DEFAULT_THREAD if requested is None or requested == "" else valid_name("thread", requested)


__all__ = ["DEFAULT_THREAD", "thread_for"]
