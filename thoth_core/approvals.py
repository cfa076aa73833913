"""Who may list, approve, edit or reject which pending item: one policy, applied by the runtime for every frontend.

Every item of the `approvals` hook names whom it is about: `workspace` and `peer` (both None for an
item about no one person, e.g. a guideline for every conversation). An `Actor` is a person (`peer`)
in a `workspace`, as the frontend they use names them.

Deciders may list every item and approve, edit or reject any. They are:

- `[thoth] founders`, when that list is set: exactly those people, and nobody else;
- otherwise the home's owner: `[thoth] owner`, or when that is unset the OS user running this
  process (`getpass.getuser()`, which is also the CLI's default `--peer` and `--actor`), so on a
  personal home the person who runs `thoth` decides without configuring anything;
- and, also only without founders, an admin of the actor's workspace as the frontend serving that
  workspace knows it (the `workspace_admin` hook; Slack asks `users.info` for `is_admin` or
  `is_owner`). An admin decides the items of that workspace and those about no one.

Everyone else lists only the items about themselves and may only withdraw (reject) their own.
"""

from __future__ import annotations

import getpass
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .config import Config
from .errors import ThothError

ACTIONS = ("list", "approve", "edit", "reject")
DECISIONS = ACTIONS[1:]
OWNER_KEYS = ("workspace", "peer")  # what every approvals item must name


class ApprovalRefused(ThothError):
    """A person asked for an action on an item the approvals policy does not allow them; one line, shown to them."""


@dataclass(frozen=True)
class Actor:
    """Who asks: a peer in a workspace; `admin` when the frontend serving the workspace says they administer it."""

    peer: str
    workspace: str
    admin: bool = False


def about(item: dict[str, Any]) -> tuple[str | None, str | None]:
    """(workspace, peer) an item is about; (None, None) for an item about no one person."""
    workspace, peer = item.get("workspace"), item.get("peer")
    return (str(workspace) if workspace else None, str(peer) if peer else None)


def os_user() -> str:
    """The OS user running this process ('' when the system cannot name one)."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no USER/LOGNAME and no passwd entry (some containers): nobody owns the home
        return ""


@dataclass(frozen=True)
class Policy:
    """The deciders of one home (`[thoth] founders`, else its owner and workspace admins) and what others may do."""

    founders: tuple[str, ...] = ()
    owner: str = ""

    @classmethod
    def of(cls, config: Config) -> Policy:
        """The policy `thoth.toml` sets: `[thoth] founders`, `[thoth] owner` (default: the OS user)."""
        founders = config.get("thoth.founders") or []
        if not isinstance(founders, list) or not all(isinstance(f, str) and f.strip() for f in founders):
            raise config.error("thoth.founders", f"expected a list of non-empty names, got {founders!r}")
        owner = config.get("thoth.owner")
        if owner is not None and (not isinstance(owner, str) or not owner.strip()):
            raise config.error("thoth.owner", f"expected a non-empty name, got {owner!r}")
        return cls(tuple(f.strip() for f in founders), owner.strip() if owner else os_user())

    def may_be_admin(self, peer: str) -> bool:
        """Whether being a workspace admin would change what this peer may do (no founders, not the owner)."""
        return not self.founders and peer != self.owner

    def decides(self, actor: Actor, item: dict[str, Any]) -> bool:
        """Whether the actor may approve, edit and reject this item (and see it) whoever it is about."""
        if self.founders:
            return actor.peer in self.founders
        if self.owner and actor.peer == self.owner:
            return True
        return actor.admin and about(item)[0] in (None, actor.workspace)

    def refusal(self, actor: Actor, action: str, item: dict[str, Any]) -> str | None:
        """None when the actor may do this action on the item, else the one line that says why not."""
        if action not in ACTIONS:
            raise ThothError(f"unknown action {action!r}; expected one of {', '.join(ACTIONS)}")
        if self.decides(actor, item):
            return None
        mine = about(item) == (actor.workspace, actor.peer)
        if mine and action in ("list", "reject"):
            return None
        why = "you may only withdraw (reject) it" if mine else "it is not about you"
        return f"{actor.peer} may not {action} {item.get('id')}: {why}; {self.who_decides()}"

    def visible(self, actor: Actor, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items this actor may see: all for a decider, else those about them."""
        return [item for item in items if self.refusal(actor, "list", item) is None]

    def who_decides(self) -> str:
        """Who the deciders are, in words."""
        if self.founders:
            return f"only founders decide ({', '.join(self.founders)})"
        owner = f"the home's owner ({self.owner})" if self.owner else "the home's owner ([thoth] owner, unset)"
        return f"only {owner} or an admin of the item's workspace decides"


__all__ = ["ACTIONS", "DECISIONS", "OWNER_KEYS", "Actor", "ApprovalRefused", "Policy", "about", "os_user"]
