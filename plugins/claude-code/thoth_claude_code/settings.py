"""`[plugins.claude-code]`: who the person in Claude Code is and how long a hook may hold a prompt."""

from __future__ import annotations

import getpass
import math
from dataclasses import dataclass
from typing import Any

from thoth_core.config import Config, unknown

NAME = "claude-code"
KEYS = {
    "peer": "the peer Claude Code's user is in Thoth (default: the OS user name)",
    "budget": "seconds UserPromptSubmit may add to a prompt (default 1.5)",
    "start_budget": "seconds SessionStart may add to a session's start (default 5)",
    "idle_minutes": "a Claude Code session idle longer than this starts afresh in working memory (default 720)",
    "max_chars": "characters of context given to Claude Code per hook (its hook output limit is 10,000)",
}
CORE_KEYS = ("deadline", "background_deadline")  # checked by the core for every plugin


def default_peer() -> str:
    """The OS user name, or `user` where the system has none."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no USER/LOGNAME and no passwd entry (some containers)
        return "user"


DEFAULTS: dict[str, Any] = {
    "peer": default_peer(),
    "budget": 1.5,
    "start_budget": 5.0,
    "idle_minutes": 720.0,
    "max_chars": 10_000,
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
        """Read and check the table; a bad key or value is a ConfigError naming file, line and key."""
        table = config.get(f"plugins.{NAME}", {}) or {}
        for key in table:
            if key not in KEYS and key not in CORE_KEYS:
                raise config.error(
                    f"plugins.{NAME}.{key}", unknown(key, [*KEYS, *CORE_KEYS], f"key in [plugins.{NAME}]")
                )
        values = {**DEFAULTS, **{k: v for k, v in table.items() if k in KEYS}}
        peer = values["peer"]
        if not isinstance(peer, str) or not peer.strip():
            raise config.error(f"plugins.{NAME}.peer", f"expected a peer name, got {peer!r}")
        for key in ("budget", "start_budget", "idle_minutes"):
            _positive(config, key, values[key])
        chars = values["max_chars"]
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 100:
            raise config.error(f"plugins.{NAME}.max_chars", f"expected an integer of at least 100, got {chars!r}")
        return cls(
            peer=peer.strip(),
            budget=float(values["budget"]),
            start_budget=float(values["start_budget"]),
            idle_minutes=float(values["idle_minutes"]),
            max_chars=chars,
        )


def _positive(config: Config, key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise config.error(f"plugins.{NAME}.{key}", f"expected a positive number, got {value!r}")


__all__ = ["DEFAULTS", "KEYS", "NAME", "Settings", "default_peer"]
