"""The subagent roster of `persona/AGENTS.md`: agent ids, read leniently."""

from __future__ import annotations

import re
from pathlib import Path

_ID = r"`?\*{0,2}([a-z][a-z0-9_\-]{1,40})\*{0,2}`?"
_PATTERNS = (
    re.compile(rf"^#{{2,4}}\s+{_ID}\s*(?:[—:\-(]|$)"),
    re.compile(rf"^[-*]\s+{_ID}\s*(?:[—:\-(]|$)"),
    re.compile(rf"^\|\s*{_ID}\s*\|"),
)


def agent_ids(path: Path) -> list[str]:
    """Agent ids named in a roster file (headings, list items or table rows); [] if missing."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    found: list[str] = []
    for line in text.splitlines():
        for pattern in _PATTERNS:
            match = pattern.match(line.strip().lower())
            if match and match.group(1) not in found and match.group(1) not in ("agent", "id", "name"):
                found.append(match.group(1))
                break
    return found
