"""What plugins hand the core: each hook's result and each slash command's handler, checked; a fault in one line.

`check(hook, result)` gives the part of a result the caller can use and, when something was wrong,
one line saying what (`"returned dict, expected a ContextBlock, a list of them or None"`). The
dispatcher applies it to every call, so `thoth context --json`, `thoth doctor` and the logs all
show the same verdict (`bad-result`); a list keeps its good items (nothing usable is lost).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .types import ContextBlock


def _name(value: Any) -> str:
    return type(value).__name__


def _items(result: Any, ok: Callable[[Any], bool], expected: str, *, single: bool = False) -> tuple[Any, str | None]:
    """A list whose items must pass `ok` (a single item too, with `single`); None is always fine."""
    if result is None:
        return None, None
    if single and ok(result):
        return result, None
    if not isinstance(result, list | tuple):
        return None, f"returned {_name(result)}, expected {expected}"
    kept = [item for item in result if ok(item)]
    bad = [item for item in result if not ok(item)]
    if bad:
        return kept, f"returned a list holding {_name(bad[0])} ({len(bad)} of {len(result)} items), expected {expected}"
    return kept, None


def _mapping(result: Any, expected: str) -> tuple[Any, str | None]:
    if result is None or isinstance(result, dict):
        return result, None
    return None, f"returned {_name(result)}, expected {expected}"


RECORD_KEYS = ("layer", "kind", "id", "text", "at")


def _is_record(value: Any) -> bool:
    """Whether value has a MemoryRecord's required keys, with an `id` and `text` that are strings."""
    return (
        isinstance(value, dict)
        and all(key in value for key in RECORD_KEYS)
        and isinstance(value["id"], str)
        and isinstance(value["text"], str)
    )


def _record(result: Any) -> tuple[Any, str | None]:
    if result is None or _is_record(result):
        return result, None
    return None, f"returned {_name(result)}, expected a MemoryRecord dict (layer, kind, id, text, at) or None"


CHECKS: dict[str, Callable[[Any], tuple[Any, str | None]]] = {
    "pre_spawn_context": lambda r: _items(
        r, lambda b: isinstance(b, ContextBlock), "a ContextBlock, a list of them or None", single=True
    ),
    "turn_tools": lambda r: _items(
        r, lambda t: isinstance(t, dict) and bool(t.get("name")), "a list of tool definitions (dicts with a name)"
    ),
    "recall": lambda r: _items(r, lambda h: isinstance(h, dict), "a list of dicts (RecallHit) or None"),
    "layer_status": lambda r: _mapping(r, "a dict (LayerStatus) or None"),
    "forget": lambda r: _mapping(r, "a dict of counts or None"),
    "memory_records": lambda r: _items(r, _is_record, "a list of MemoryRecord dicts (layer, kind, id, text, at)"),
    "memory_record": lambda r: _record(r),
    "edit_memory_record": lambda r: _record(r),
    "delete_memory_record": lambda r: (
        (r, None) if r is None or isinstance(r, bool) else (None, f"returned {_name(r)}, expected True, False or None")
    ),
}


def check(hook: str, result: Any) -> tuple[Any, str | None]:
    """The usable part of a hook's result, and what was wrong with it (None: nothing)."""
    checker = CHECKS.get(hook)
    return checker(result) if checker is not None else (result, None)


def command_output(output: Any) -> tuple[str, str | None]:
    """A slash command's text: a str, or None for no text; anything else is a bad result."""
    if output is None or isinstance(output, str):
        return output or "", None
    return "", f"returned {_name(output)}, expected a str or None"


COMMAND_ARGUMENTS = ("args", "turn", "session", "runtime")  # what a slash command's handler is called with


def handler_problem(handler: Any) -> str | None:
    """Why a slash command's handler cannot take `args=, turn=, session=, runtime=` (None: it can)."""
    if not callable(handler):
        return f"its handler is {_name(handler)}, not a function"
    try:
        parameters = list(inspect.signature(handler).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: trusted
        return None
    named = {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    shown = f"{getattr(handler, '__name__', 'handler')}({', '.join(p.name for p in parameters)})"
    if not any(p.kind is p.VAR_KEYWORD for p in parameters):
        missing = [name for name in COMMAND_ARGUMENTS if name not in named]
        if missing:
            return f"its handler {shown} does not take {', '.join(missing)}: accept **_ too"
    required = [
        p.name
        for p in parameters
        if p.default is p.empty
        and (
            p.kind is p.POSITIONAL_ONLY
            or (p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name not in COMMAND_ARGUMENTS)
        )
    ]
    if required:
        return f"its handler {shown} needs {', '.join(required)}, which commands are never given"
    return None
