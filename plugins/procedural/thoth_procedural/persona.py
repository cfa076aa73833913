"""The persona stack: `persona/*.md` loaded at session start as the stable front of the system prompt.

Order (also the blocks' priority, highest first): IDENTITY.md (who the agent is), SOUL.md
(values and voice), RULES.md (hard rules), AGENTS.md (the subagent roster), USER.md (who it
works for), TOOLS.md (what it can use). MEMORY.md belongs to the stack too but is the working
layer's (thoth-working reads it once per session), so it is not loaded here. Missing files are
skipped; a file that exists but cannot be read is an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from thoth_core import ContextBlock, ThothError

PERSONA_ORDER = ("IDENTITY.md", "SOUL.md", "RULES.md", "AGENTS.md", "USER.md", "TOOLS.md")
TOP_PRIORITY = 100


class PersonaError(ThothError):
    """A persona file exists but cannot be read; the message names it."""


def read_persona_file(path: Path) -> str | None:
    """A persona file's text, None when it does not exist."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise PersonaError(f"{path}: cannot read persona file: {exc}") from exc


def load_persona(folder: Path, *, on_error: Callable[[PersonaError], None] | None = None) -> list[ContextBlock]:
    """The persona blocks in PERSONA_ORDER (stable, tag `persona`), skipping missing or empty files.

    An unreadable file raises PersonaError, or, given on_error, is reported there and skipped.
    """
    blocks = []
    for rank, name in enumerate(PERSONA_ORDER):
        try:
            text = read_persona_file(folder / name)
        except PersonaError as exc:
            if on_error is None:
                raise
            on_error(exc)
            continue
        if text:
            blocks.append(ContextBlock(tag="persona", text=text, stable=True, priority=TOP_PRIORITY - rank))
    return blocks
