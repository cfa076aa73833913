"""MEMORY.md as the working layer reads it: the file (or its shared sections) and the lines one peer may see."""

from __future__ import annotations

from pathlib import Path

from thoth_core import ThothError
from thoth_core.owners import split_owner
from thoth_core.sections import HomeSections


def read_memory(path: Path, sections: HomeSections | None = None) -> str:
    """MEMORY.md's text (its marked sections as every host sees them, when `sections` are shared);
    a missing file is empty, an unreadable one an error naming it."""
    try:
        if sections is not None:
            return sections.read(path).strip()
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as exc:
        raise ThothError(f"{path}: cannot read the auto-memory file: {exc}") from exc


def visible_memory(text: str, *, peer: str, workspace: str) -> str:
    """The lines of MEMORY.md this peer may see: untagged ones and its own (tag removed)."""
    kept = []
    for line in text.splitlines():
        content, owner = split_owner(line)
        if owner is None or owner == (peer, workspace):
            kept.append(content)
    return "\n".join(kept).strip()
