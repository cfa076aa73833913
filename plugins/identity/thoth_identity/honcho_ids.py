"""Honcho ids of Thoth names: workspaces, peers, a peer's thread as a session, and a message's no-deriving setting."""

from __future__ import annotations

import hashlib
import re

NO_DERIVING = {"reasoning": {"enabled": False}}  # a message's configuration: Honcho draws no conclusions from it


def honcho_id(name: str) -> str:
    """A Honcho resource id for a Thoth name (peer, thread, workspace)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:200] or "_"
    return cleaned if cleaned == name else f"{cleaned}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def session_id(peer: str, thread: str) -> str:
    """The Honcho session of a peer's thread: readable, and distinct for every (peer, thread) pair."""
    digest = hashlib.sha1(f"{peer}\x00{thread}".encode()).hexdigest()[:12]
    return f"{honcho_id(f'{peer}-{thread}')[:80]}-{digest}"  # well inside Honcho's id length
