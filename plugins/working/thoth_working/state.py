"""The working layer's per-runtime state: its settings (`[plugins.working]`), the session store, live sessions."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from thoth_core import Session

from .store import SessionStore

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

NAME = "working"

CONFIG_DEFAULTS = {f"plugins.{NAME}": {"memory_file": "persona/MEMORY.md", "restore_turns": 200}}  # every key


@dataclass(frozen=True)
class Settings:
    """`[plugins.working]`: where MEMORY.md is and how many turns a resumed session gets back."""

    memory_file: Path
    restore_turns: int = 200

    @classmethod
    def of(cls, runtime: Runtime) -> Settings:
        """The plugin's settings from thoth.toml, with one-line errors naming the key."""
        table = {**CONFIG_DEFAULTS[f"plugins.{NAME}"], **runtime.config.plugin(NAME)}
        memory_file = table["memory_file"]
        if not isinstance(memory_file, str) or not memory_file:
            raise runtime.config.error(f"plugins.{NAME}.memory_file", f"expected a path, got {memory_file!r}")
        restore = runtime.config.integer(f"plugins.{NAME}.restore_turns", table["restore_turns"], high=1_000_000)
        return cls(memory_file=runtime.config.root / memory_file, restore_turns=restore)


@dataclass
class WorkingState:
    """Per-runtime state: settings, the session store, live sessions, MEMORY.md as read per session."""

    settings: Settings
    store: SessionStore
    memory: dict[str, str] = field(default_factory=dict)
    live: dict[str, Session] = field(default_factory=dict)

    def close(self) -> None:
        """Write what live sessions recorded since their last flush (a failed turn's error), then close the index."""
        for session in self.live.values():
            if not session.ended:
                try:
                    self.store.flush(session)
                except Exception as exc:  # noqa: BLE001 - one session's file must not keep the others unwritten
                    logger.error("working: session %s: flushing its transcript failed: %s", session.id, exc)
        self.live.clear()
        self.store.close()


def state(runtime: Runtime) -> WorkingState:
    """This runtime's working-memory state."""
    return runtime.plugin_state(
        NAME, lambda: WorkingState(Settings.of(runtime), SessionStore(runtime.home / "working", runtime.config))
    )
