"""Line diffs (difflib) as rows a template shows: what an approval would change, what an edit changed."""

from __future__ import annotations

import difflib
from typing import NamedTuple

CONTEXT = 3


class DiffLine(NamedTuple):
    """One line of a unified diff: `add`, `remove`, `hunk` or `same`, and its text (escaped by the template)."""

    kind: str
    text: str


def diff_lines(before: str, after: str, *, before_name: str = "now", after_name: str = "proposed") -> list[DiffLine]:
    """The unified diff of two texts as classified lines; empty when they are the same."""
    lines = difflib.unified_diff(
        before.splitlines(), after.splitlines(), before_name, after_name, n=CONTEXT, lineterm=""
    )
    out: list[DiffLine] = []
    for line in lines:
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "remove", "@": "hunk"}.get(line[:1], "same")
        out.append(DiffLine(kind, line))
    return out
