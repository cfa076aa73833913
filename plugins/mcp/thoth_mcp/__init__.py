"""thoth-mcp: Thoth's memory as an MCP server (`thoth mcp`), built on the official `mcp` SDK."""

from __future__ import annotations

__all__: list[str] = []
