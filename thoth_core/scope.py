"""Who a request may reach: validated peer, workspace and thread names, and a server's pin.

Every call of a server frontend (`thoth mcp`, `thoth serve`) names its peer; the server answers
only about that peer. `--peer P` pins the server: calls may leave the peer out, and a call
naming another peer is refused. The same holds for `--workspace`. Names are checked before
they reach the runtime, so a malformed one is one clear line, never a path or a query fragment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import ThothError

NAME = re.compile(r"[A-Za-z0-9_@][A-Za-z0-9_@.+:-]{0,127}")
NAME_RULE = "1-128 characters: letters, digits and _ @ . + : - (starting with a letter, digit, _ or @)"


class ScopeError(ThothError):
    """A call named a peer, workspace or thread it may not use; the server's client sees the message."""


def valid_name(key: str, value: object) -> str:
    """The value as a name, or a ScopeError naming the key and the value."""
    if not isinstance(value, str) or not value.strip():
        raise ScopeError(f"{key}: required, a non-empty name ({NAME_RULE})")
    if not NAME.fullmatch(value):
        shown = value if len(value) <= 40 else value[:37] + "..."
        raise ScopeError(f"{key}: {shown!r} is not a valid name ({NAME_RULE})")
    return value


@dataclass(frozen=True)
class Scope:
    """The peer and workspace a server is pinned to (None: each call names its own)."""

    peer: str | None = None
    workspace: str | None = None
    default_workspace: str = "default"

    def __post_init__(self) -> None:
        if self.peer is not None:
            valid_name("--peer", self.peer)
        if self.workspace is not None:
            valid_name("--workspace", self.workspace)

    def peer_for(self, requested: str | None) -> str:
        """The peer a call may use: the one it names, which must be the pinned one if there is a pin."""
        if requested is None or requested == "":
            if self.peer is None:
                raise ScopeError("peer: required (whose memory to use), unless the server runs with --peer")
            return self.peer
        peer = valid_name("peer", requested)
        if self.peer is not None and peer != self.peer:
            raise ScopeError(f"peer: {peer!r} refused; this server is pinned to peer {self.peer!r} (--peer)")
        return peer

    def workspace_for(self, requested: str | None) -> str:
        """The workspace a call may use: the one it names, else the pinned one, else the config's."""
        if requested is None or requested == "":
            return self.workspace or self.default_workspace
        workspace = valid_name("workspace", requested)
        if self.workspace is not None and workspace != self.workspace:
            raise ScopeError(
                f"workspace: {workspace!r} refused; this server is pinned to workspace {self.workspace!r} (--workspace)"
            )
        return workspace


__all__ = ["NAME", "NAME_RULE", "Scope", "ScopeError", "valid_name"]
