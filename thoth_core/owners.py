"""Owner tags: the trailing `<!-- peer:P ws:W -->` that says whose a line of a shared file is.

Only the last tag of a line counts, and neither name may contain `-->`; content written with a
tag has any `<!--` of its own escaped, so text a person typed cannot forge another owner.
"""

from __future__ import annotations

import re

OWNER_TAG = re.compile(r"\s*<!-- peer:(?P<peer>(?:(?!-->).)+?) ws:(?P<workspace>(?:(?!-->).)+?) -->\s*$")

Owner = tuple[str, str]  # (peer, workspace)


def owner_tag(owner: Owner) -> str:
    """The trailing tag naming a line's peer and workspace."""
    return f"<!-- peer:{owner[0]} ws:{owner[1]} -->"


def split_owner(line: str) -> tuple[str, Owner | None]:
    """A line without its owner tag, and the owner it names (None when untagged)."""
    match = OWNER_TAG.search(line)
    if match is None:
        return line, None
    return line[: match.start()], (match.group("peer"), match.group("workspace"))


def tagged(line: str, owner: Owner | None) -> str:
    """The line, its own `<!--` escaped, with its owner's tag appended (unchanged when there is no owner)."""
    return f"{line.replace('<!--', '&lt;!--')} {owner_tag(owner)}" if owner else line
