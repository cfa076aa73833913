"""Tools plugins offer the model: each call recorded in the session transcript."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from .redact import redactor_of
from .types import Session, Turn


def recorded(tool: dict[str, Any], plugin: str, turn: Turn, session: Session) -> Callable[[Any], Awaitable[str]]:
    """Wrap a tool handler so each call lands in the session transcript."""
    handler = tool["handler"]
    redactor = redactor_of(session)  # the runtime's `[privacy]` policy

    async def call(tool_input: Any) -> str:
        entry: dict[str, Any] = {
            "type": "tool",
            "turn_id": turn.id,
            "at": time.time(),
            "plugin": plugin,
            "name": tool["name"],
            "input": redactor.redact_tree(tool_input),
        }
        session.transcript.append(entry)
        try:
            output = (
                handler(tool_input)
                if inspect.iscoroutinefunction(handler)
                else await asyncio.to_thread(handler, tool_input)
            )
            output = await output if inspect.isawaitable(output) else output
        except Exception as exc:
            entry["error"] = redactor.redact(f"{type(exc).__name__}: {exc}")
            raise
        entry["output"] = redactor.redact(str(output)[:2000])
        return str(output)

    return call
