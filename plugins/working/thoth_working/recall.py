"""What the working layer recalls for a query: the lines of MEMORY.md the peer may see, by meaning and words."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from thoth_core import RecallHit, hookimpl
from thoth_core.sections import home_sections

from .memory_file import read_memory, visible_memory
from .records import LAYER
from .state import state

if TYPE_CHECKING:
    from thoth_core import Runtime

NOTE = re.compile(r"^[-*]\s+(?:\[(?P<day>\d{4}-\d{2}-\d{2})\]\s+)?(?P<text>.+)$")


def memory_lines(text: str) -> list[tuple[str, str | None]]:
    """The (text, day) of each note or paragraph line of MEMORY.md: no headings, markers or blank lines."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "<!--")):
            continue
        match = NOTE.match(line)
        found.append((match["text"], match["day"]) if match else (line, None))
    return found


@hookimpl
def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[RecallHit]:
    """The MEMORY.md lines this peer may see that match the query."""
    path = state(runtime).settings.memory_file
    lines = memory_lines(visible_memory(read_memory(path, home_sections(runtime)), peer=peer, workspace=workspace))
    return [
        {
            "layer": LAYER,
            "kind": "memory",
            "id": f"memory:{lines[m.index][0][:80]}",
            "text": lines[m.index][0],
            "score": m.score,
            "why": m.why,
            "at": day_start(lines[m.index][1]),
        }
        for m in runtime.meaning.rank(query, [text for text, _ in lines], limit=limit)
    ]


def day_start(day: str | None) -> float:
    """A note's `YYYY-MM-DD` as unix seconds (midnight UTC), 0 for a line without one."""
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp() if day else 0.0
