"""`[plugins.claude-code]`: who the person in Claude Code is and how long a hook may hold a prompt."""

from __future__ import annotations

import getpass
from dataclasses import dataclass
from typing import Any

from thoth_core.config import Config

NAME = "claude-code"


def default_peer() -> str:
    """The OS user name, or `user` where the system has none."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no USER/LOGNAME and no passwd entry (some containers)
        return "user"


# Every key of the table (the core refuses others, see `CONFIG_DEFAULTS` in plugin.py), with its default.
DEFAULTS: dict[str, Any] = {
    "peer": default_peer(),  # the peer Claude Code's user is in Thoth
    "budget": 1.5,  # seconds UserPromptSubmit may add to a prompt
    "start_budget": 5.0,  # seconds SessionStart may add to a session's start
    "idle_minutes": 720.0,  # a Claude Code session idle longer than this starts afresh in working memory
    "max_chars": 10_000,  # characters of context given to Claude Code per hook (its hook output limit is 10,000)
}


@dataclass(frozen=True)
class Settings:
    """The validated `[plugins.claude-code]` table."""

    peer: str
    budget: float
    start_budget: float
    idle_minutes: float
    max_chars: int

    @classmethod
    def of(cls, config: Config) -> Settings:
        """Read and check the table's values (the core refuses unknown keys); a ConfigError names file, line and key."""
        values = {**DEFAULTS, **(config.get(f"plugins.{NAME}", {}) or {})}
        peer = values["peer"]
        if not isinstance(peer, str) or not peer.strip():
            raise config.error(f"plugins.{NAME}.peer", f"expected a peer name, got {peer!r}")

        def positive(key: str, high: float) -> float:
            return config.number(f"plugins.{NAME}.{key}", values[key], positive=True, high=high)

        return cls(
            peer=peer.strip(),
            budget=positive("budget", 600),  # Claude Code's own hook timeout is 60 s by default
            start_budget=positive("start_budget", 600),
            idle_minutes=positive("idle_minutes", 525_600),  # a year
            max_chars=config.integer(f"plugins.{NAME}.max_chars", values["max_chars"], low=100, high=10_000_000),
        )


__all__ = ["DEFAULTS", "NAME", "Settings", "default_peer"]
