"""One table of approvals cases that every frontend's tests run (chat commands, TUI, Slack, MCP, CLI).

Each case is an actor, whom a pending item is about, an action, and whether the policy allows it
(`thoth_core.approvals`). The people are symbolic; a frontend maps them to its own ids (Slack user
ids, say) with `people`. The home's owner is `ann` (`[thoth] owner`); cases with `founders` set
`[thoth] founders = ["lead"]`; `carl` administers the workspace wherever a frontend can say so
(`workspace_admin`). `QueuePlugin` is a queue that holds one item about each person and records
the decisions that reach it, so a test sees that a refused action never got to the plugin.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from thoth_core import hookimpl

WORKSPACE = "default"
OWNER, PERSON, STRANGER, FOUNDER, ADMIN = "ann", "bob", "eve", "lead", "carl"
NOBODY = None  # an item about no one person


@dataclass(frozen=True)
class Case:
    """`actor` tries `action` on the item about `about`: allowed, or refused with a line containing `refusal`."""

    actor: str
    about: str | None
    action: str
    allowed: bool
    founders: bool = False
    refusal: str = ""

    @property
    def id(self) -> str:
        """A readable test id."""
        where = "founders" if self.founders else "no-founders"
        return f"{self.actor}-{self.action}-{self.about or 'nobody'}-{where}-{'ok' if self.allowed else 'refused'}"


ONLY_WITHDRAW = "you may only withdraw (reject) it"
NOT_YOURS = "it is not about you"
CASES = [
    # the owner decides everything on a personal home
    Case(OWNER, PERSON, "list", True),
    Case(OWNER, NOBODY, "list", True),
    Case(OWNER, PERSON, "approve", True),
    Case(OWNER, PERSON, "edit", True),
    Case(OWNER, PERSON, "reject", True),
    # the person an item is about sees it and may withdraw it, nothing more
    Case(PERSON, PERSON, "list", True),
    Case(PERSON, PERSON, "reject", True),
    Case(PERSON, PERSON, "approve", False, refusal=ONLY_WITHDRAW),
    Case(PERSON, PERSON, "edit", False, refusal=ONLY_WITHDRAW),
    Case(PERSON, OWNER, "list", False),
    Case(PERSON, NOBODY, "list", False),
    # a stranger sees nothing and changes nothing (issue 36: nobody4 listed and approved alice's notes)
    Case(STRANGER, PERSON, "list", False),
    Case(STRANGER, PERSON, "approve", False, refusal=NOT_YOURS),
    Case(STRANGER, PERSON, "reject", False, refusal=NOT_YOURS),
    Case(STRANGER, NOBODY, "approve", False, refusal=NOT_YOURS),
    # a workspace admin decides the workspace's items (without founders)
    Case(ADMIN, PERSON, "list", True),
    Case(ADMIN, PERSON, "approve", True),
    # with founders set, they alone decide; the owner is then one person among others
    Case(FOUNDER, PERSON, "list", True, founders=True),
    Case(FOUNDER, PERSON, "approve", True, founders=True),
    Case(OWNER, PERSON, "list", False, founders=True),
    Case(OWNER, PERSON, "approve", False, founders=True, refusal="only founders decide"),
    Case(ADMIN, PERSON, "approve", False, founders=True, refusal="only founders decide"),
    Case(PERSON, PERSON, "reject", True, founders=True),
    Case(PERSON, PERSON, "approve", False, founders=True, refusal=ONLY_WITHDRAW),
]


def thoth_table(case: Case, people: dict[str, str] | None = None) -> dict[str, Any]:
    """The `[thoth]` table of a case's home: the owner, and founders when the case has them."""
    name = (people or {}).get
    return {"owner": name(OWNER, OWNER), "founders": [name(FOUNDER, FOUNDER)] if case.founders else []}


def item_id(about: str | None) -> str:
    """The id of the table's item about a person (or about no one)."""
    return f"table:{about or 'nobody'}"


@dataclass
class QueuePlugin:
    """A plugin queue holding one pending item about each person (names mapped by `people`)."""

    people: dict[str, str] = field(default_factory=dict)
    workspace: str = WORKSPACE
    decided: list[tuple[str, str, str]] = field(default_factory=list)  # (item id, decision, actor)

    def __post_init__(self) -> None:
        self.pending = {item_id(about) for about in (OWNER, PERSON, STRANGER, NOBODY)}

    @hookimpl
    def approvals(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        for about in (OWNER, PERSON, STRANGER, NOBODY):
            if item_id(about) not in self.pending:
                continue
            peer = self.people.get(about, about) if about else None
            items.append(
                {
                    "id": item_id(about),
                    "kind": "table",
                    "title": f"a note about {peer or 'no one'}",
                    "body": f"{peer or 'everyone'} likes tea",
                    "workspace": self.workspace if about else None,
                    "peer": peer,
                    "source": {},
                    "flags": [],
                    "created_at": time.time(),
                }
            )
        return items

    @hookimpl
    def decide(self, item_id: str, decision: str, actor: str) -> dict[str, Any] | None:
        if item_id not in self.pending:
            return None
        self.decided.append((item_id, decision, actor))
        if decision != "edit":
            self.pending.discard(item_id)
        return {"id": item_id, "message": f"{decision} {item_id} by {actor}"}


class AdminPlugin:
    """A frontend that says who administers the workspace: `carl` (mapped by `people`)."""

    def __init__(self, people: dict[str, str] | None = None, workspace: str = WORKSPACE) -> None:
        self.admin = (people or {}).get(ADMIN, ADMIN)
        self.workspace = workspace

    @hookimpl
    def workspace_admin(self, peer: str, workspace: str) -> bool | None:
        return peer == self.admin if workspace == self.workspace else None


__all__ = [
    "ADMIN",
    "CASES",
    "FOUNDER",
    "NOBODY",
    "OWNER",
    "PERSON",
    "STRANGER",
    "WORKSPACE",
    "AdminPlugin",
    "Case",
    "QueuePlugin",
    "item_id",
    "thoth_table",
]
