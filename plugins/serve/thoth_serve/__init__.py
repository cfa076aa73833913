"""thoth-serve: Thoth as a resident service (`thoth serve`): REST API, turns over SSE, MCP over HTTP, the inspector."""

from __future__ import annotations

__all__: list[str] = []
