"""What a person or frontend hands the runtime, checked before anything is kept or sent to a model.

A peer, thread or workspace name scopes every store, prompt and file; one that is empty, holds a
control or invisible character, has spaces at either end, or runs past `NAME_MAX` characters is a
mistake (or an attack on whoever reads the transcripts), so it is refused in one line. A message
or `/remember` text that is not valid Unicode (bytes that were not UTF-8 reach Python as lone
surrogates) or holds a NUL character cannot be kept by every store, so it is refused before the
turn is journaled, rather than failing each layer after the model was paid for.
"""

from __future__ import annotations

import re

from .errors import InputError

NAME_MAX = 128
_BAD_TEXT = re.compile(r"[\ud800-\udfff\x00]")


def name_problem(value: object) -> str | None:
    """Why value cannot be a peer, thread or workspace name, or None when it can."""
    if not isinstance(value, str):
        return "expected a name (a string)"
    if not value:
        return "must not be empty"
    if len(value) > NAME_MAX:
        return f"longer than {NAME_MAX} characters ({len(value):,})"
    if value != value.strip():
        return "must not start or end with a space"
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        return f"holds a control or invisible character (U+{ord(bad):04X})"
    return None


def check_name(kind: str, value: object) -> str:
    """value when it is a good name; else InputError naming the kind (`peer`, `thread`, `workspace`) and value."""
    problem = name_problem(value)
    if problem:
        shown = repr(value) if not isinstance(value, str) or len(value) <= 60 else f"{value[:40]!r}..."
        raise InputError(f"{kind} name {shown}: {problem}; nothing was sent or kept")
    return value  # type: ignore[return-value]


def check_scope(*, peer: object, thread: object, workspace: object = None) -> None:
    """Raise InputError for the first bad name of a turn's scope (workspace None: the configured one, checked)."""
    check_name("peer", peer)
    check_name("thread", thread)
    if workspace is not None:
        check_name("workspace", workspace)


def text_problem(text: str) -> str | None:
    """Why text cannot be kept (not valid UTF-8, a lone surrogate, a NUL), or None when it can."""
    found = _BAD_TEXT.search(text)
    if found is None:
        return None
    at, char = found.start(), ord(found.group())
    if 0xDC80 <= char <= 0xDCFF:  # how Python's surrogateescape carries a byte that is not UTF-8
        return f"is not valid UTF-8 (byte 0x{char - 0xDC00:02X} at character {at})"
    if char == 0:
        return f"holds a NUL character (at character {at})"
    return f"is not valid Unicode (a lone surrogate U+{char:04X} at character {at})"


def check_text(text: str, *, what: str = "the message") -> str:
    """text when every store can keep it; else InputError saying why."""
    problem = text_problem(text)
    if problem:
        raise InputError(f"{what} {problem}; nothing was sent or kept")
    return text


__all__ = ["NAME_MAX", "check_name", "check_scope", "check_text", "name_problem", "text_problem"]
