"""`[plugins.reflection]` settings and the per-runtime state (database, model) built from them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from thoth_core import Model

from .store import Store

logger = logging.getLogger(__name__)

NAME = "reflection"


@dataclass(frozen=True)
class Settings:
    """Every reflection option, with its default."""

    model: str | None = None  # another configured provider for reflection (default: the chat model)
    model_options: dict[str, Any] = field(default_factory=dict)  # merged over [models.<model>], e.g. a cheaper model id
    max_tokens: int = 2048  # reply limit of a reflection run
    transcript_tokens: int = 6000  # the most recent part of a transcript sent to the model
    memory_file: str = (
        ""  # relative to the project root; default: [plugins.working] memory_file, else persona/MEMORY.md
    )
    observations_file: str = ""  # where approved persona observations go; default: <procedural persona_dir>/RULES.md
    knowledge_dir: str = ""  # where approved transient notes are promoted; default: [plugins.procedural] knowledge_dir
    snapshot_tokens: int = 600  # the memory snapshot never grows past this
    transient_days: int = 14  # reflection and validation records are pruned after this many days

    @classmethod
    def from_runtime(cls, runtime: Any) -> Settings:
        """Read and check the table; raises ConfigError naming the bad key."""
        table = runtime.config.plugin(NAME)
        known = {f.name: f for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key in ("deadline", "background_deadline"):  # core keys, valid for every plugin
                continue
            if key not in known:
                raise runtime.config.error(
                    f"plugins.{NAME}.{key}", f"unknown option; expected one of {', '.join(known)}"
                )
            default = getattr(cls(), key)
            expected = (
                (int, float) if isinstance(default, (int, float)) else type(default) if default is not None else str
            )
            if isinstance(value, bool) or not isinstance(value, expected):
                raise runtime.config.error(f"plugins.{NAME}.{key}", f"expected {_describe(expected)}, got {value!r}")
            if isinstance(value, (int, float)) and value <= 0 or isinstance(value, str) and not value.strip():
                raise runtime.config.error(f"plugins.{NAME}.{key}", f"must be positive (or non-empty), got {value!r}")
            values[key] = value
        persona = str(runtime.config.get("plugins.procedural.persona_dir") or "persona")
        defaults = {
            "memory_file": runtime.config.get("plugins.working.memory_file") or f"{persona}/MEMORY.md",
            "observations_file": f"{persona}/RULES.md",
            "knowledge_dir": runtime.config.get("plugins.procedural.knowledge_dir") or "knowledge",
        }
        for key, default in defaults.items():
            values[key] = values.get(key) or str(default)
        return cls(**values)

    def expiry_before(self, runtime: Any, now: float) -> float:
        """The `before` passed to `expiring_records`: now minus episodic retention, or now (the owner decides)."""
        days = runtime.config.get("plugins.episodic.retention_days")
        numeric = isinstance(days, (int, float)) and not isinstance(days, bool) and days > 0
        return now - float(days) * 86400 if numeric else now


def _describe(expected: Any) -> str:
    names = {int: "an integer", float: "a number", str: "a string", dict: "a table"}
    if isinstance(expected, tuple):
        return "a number"
    return names.get(expected, expected.__name__)


class State:
    """What reflection keeps per runtime: settings, database, the reflection model."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.settings = Settings.from_runtime(runtime)
        self.dir = Path(runtime.home) / NAME
        self.store = Store(self.dir / "reflection.db")
        self._model: Model | None = None

    def model(self) -> Model:
        """The model reflection uses; raises ModelNotConfigured when there is none."""
        if self._model is None:
            name = self.settings.model
            if name is None and not self.settings.model_options:
                self._model = self.runtime.model()
            else:
                name = name or self.runtime.model_name()
                if name is None or name not in self.runtime.models:
                    available = ", ".join(sorted(self.runtime.models)) or "none"
                    raise self.runtime.config.error(
                        f"plugins.{NAME}.model", f"unknown model provider {name!r}; available: {available}"
                    )
                options = {**self.runtime.config.section(f"models.{name}"), **self.settings.model_options}
                self._model = self.runtime.models[name](self.runtime, options)
        return self._model

    def path(self, relative: str) -> Path:
        """A project file named in the settings (relative to the project root)."""
        return Path(self.runtime.config.root) / relative

    @property
    def founders(self) -> list[str]:
        """The people whose decisions count ([thoth] founders)."""
        return [str(f) for f in self.runtime.config.get("thoth.founders") or []]

    def close(self) -> None:
        """Close the database."""
        self.store.close()


def state(runtime: Any) -> State:
    """Reflection's state for this runtime."""
    return runtime.plugin_state(NAME, lambda: State(runtime))  # type: ignore[no-any-return]
