"""The per-session scratch store: a small key-value space for plugins and tools.

It is a view over `session.scratch` (a plain dict the core gives every session), so it lives
exactly as long as the session and costs a dict operation per call. Keys are strings; by
convention a plugin prefixes its own (`"episodic.last_query"`), and `list`/`clear` take a prefix.
"""

from __future__ import annotations

import time
from typing import Any

from thoth_core import Session


class Scratch:
    """set/get/list/clear over one session's scratch dict."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def set(self, key: str, value: Any) -> None:
        """Store a value under key."""
        if not isinstance(key, str):
            raise TypeError(f"scratch keys are strings, got {type(key).__name__}")
        self._data[key] = value

    def get(self, key: str, default: Any = None) -> Any:
        """The value under key, or default."""
        return self._data.get(key, default)

    def list(self, prefix: str = "") -> list[str]:
        """The keys that start with prefix, sorted."""
        return sorted(k for k in self._data if k.startswith(prefix))

    def clear(self, prefix: str = "") -> int:
        """Remove the keys that start with prefix (all by default); returns how many."""
        doomed = [k for k in self._data if k.startswith(prefix)]
        for key in doomed:
            del self._data[key]
        return len(doomed)

    def __len__(self) -> int:
        return len(self._data)


def scratch(session: Session) -> Scratch:
    """The scratch store of a session."""
    return Scratch(session.scratch)


def record_tool(session: Session, *, name: str, input: Any, output: Any, error: str | None = None) -> None:
    """Note a tool call in the session transcript; the working plugin writes it to the JSONL."""
    session.transcript.append(
        {"type": "tool", "at": time.time(), "name": name, "input": input, "output": output, "error": error}
    )
