"""Tools plugins offer the model: each call kept in the transcript and the journal, all of a turn's within its limits.

Each call (name, plugin, redacted input, output cut to 2,000 characters, or why it failed or was
stopped) is a `tool` entry of the session transcript and an item of the turn's `extra["tool_calls"]`,
which the journal keeps with the turn and every `post_turn_write` gets.

A turn's calls share one `ToolBudget`: at most `[thoth] tool_calls` calls, `[thoth] tool_seconds`
seconds of tool work, and `[budget] tools` tokens of results (a longer result is cut, with a
notice the model reads). A call past a limit is not run: its handler raises `ToolLimit`, which
the providers answer to the model as an error and then ask for a reply without tools, and the
turn's reply ends with one line saying why the tools stopped (`stopped`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .budget import count_tokens, truncate
from .errors import ToolLimit
from .redact import redactor_of
from .types import Session, Turn

TRANSCRIPT_CHARS = 2000  # of a call's output kept in the session transcript
TOOL_CALLS = "tool_calls"  # `Turn.extra` key: the turn's tool calls, as the transcript keeps them


@dataclass
class ToolBudget:
    """What one turn's tool calls may still spend, and what they did (for the turn's report)."""

    calls: int
    seconds: float
    tokens: int
    started: float = field(default_factory=time.monotonic)
    made: list[dict[str, Any]] = field(default_factory=list)  # name, plugin, tokens, ms, status per call
    stopped: str = ""  # why the tools stopped, once they did

    @classmethod
    def of(cls, config: Any) -> ToolBudget:
        """The limits `[thoth] tool_calls`, `[thoth] tool_seconds` and `[budget] tools` give."""
        return cls(
            calls=int(config.get("thoth.tool_calls")),
            seconds=float(config.get("thoth.tool_seconds")),
            tokens=int(config.get("budget.tools")),
        )

    @property
    def used_tokens(self) -> int:
        """Tokens of the results given to the model so far."""
        return sum(int(call.get("tokens", 0)) for call in self.made)

    @property
    def out_of_time(self) -> str:
        """The time limit, as the reply's notice names it."""
        return f"the limit of {self.seconds:g} s of tool work in one turn ([thoth] tool_seconds)"

    def left(self) -> float:
        """Seconds of tool work left; raises ToolLimit when no call may be made any more."""
        if len(self.made) >= self.calls:
            self.stopped = self.stopped or f"the limit of {self.calls} tool calls in one turn ([thoth] tool_calls)"
        elif time.monotonic() - self.started >= self.seconds:
            self.stopped = self.stopped or self.out_of_time
        if self.stopped:
            raise ToolLimit(f"not run: {self.stopped} is reached; answer with what you have")
        return self.seconds - (time.monotonic() - self.started)

    def fit(self, output: str) -> str:
        """The output as the model gets it: cut to the tokens the turn has left for tool results."""
        room = self.tokens - self.used_tokens
        if count_tokens(output) <= room:
            return output
        notice = f"\n[cut: this turn's tool results are limited to {self.tokens} tokens ([budget] tools)]"
        return truncate(output, max(0, room - count_tokens(notice))) + notice


def recorded(
    tool: dict[str, Any], plugin: str, turn: Turn, session: Session, budget: ToolBudget | None = None
) -> Callable[[Any], Awaitable[str]]:
    """Wrap a tool handler so each call lands in the session transcript, within the turn's `budget`."""
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
        turn.extra.setdefault(TOOL_CALLS, []).append(entry)  # journaled with the turn, given to its writers
        report: dict[str, Any] = {"name": tool["name"], "plugin": plugin, "tokens": 0, "status": "ok"}
        started = time.perf_counter()
        try:
            if budget is not None:
                left = budget.left()
                budget.made.append(report)
            else:
                left = None
            output = await asyncio.wait_for(_run(handler, tool_input), left)
        except ToolLimit as exc:
            entry["stopped"] = report["status"] = str(exc)
            raise
        except TimeoutError as exc:
            assert budget is not None  # only a budget sets a timeout
            budget.stopped = budget.out_of_time
            entry["stopped"] = report["status"] = f"stopped: {budget.stopped}"
            raise ToolLimit(f"stopped: {budget.stopped} was reached during this call") from exc
        except Exception as exc:
            entry["error"] = report["status"] = redactor.redact(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            report["ms"] = round((time.perf_counter() - started) * 1000, 2)
        text = budget.fit(str(output)) if budget is not None else str(output)
        report["tokens"] = count_tokens(text)
        entry["output"] = redactor.redact(text[:TRANSCRIPT_CHARS])
        return text

    return call


def offered(tools: list[dict[str, Any]], config: Any) -> dict[str, Any]:
    """The tools a turn offers, each with the tokens its definition costs, and the turn's limits on their calls."""
    definitions = [{k: v for k, v in tool.items() if k != "handler"} for tool in tools]
    budget = ToolBudget.of(config)
    return {
        "tools": [{"name": d["name"], "tokens": count_tokens(json.dumps(d))} for d in definitions],
        "limits": {"calls": budget.calls, "seconds": budget.seconds, "result_tokens": budget.tokens},
    }


async def _run(handler: Callable[..., Any], tool_input: Any) -> Any:
    """A handler's output, plain or async (a plain one runs in a thread)."""
    output = (
        handler(tool_input) if inspect.iscoroutinefunction(handler) else await asyncio.to_thread(handler, tool_input)
    )
    return await output if inspect.isawaitable(output) else output
