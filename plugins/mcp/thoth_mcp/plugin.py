"""The `mcp` plugin: adds `thoth mcp`, an MCP server over the runtime's memory (no hooks of a layer)."""

from __future__ import annotations

from typing import Any

from thoth_core import hookimpl

CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {"plugins.mcp": {}}  # no keys of its own: the core refuses any but its own


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import mcp

    cli.add_command(mcp)
