"""`[plugins.reflection]` settings and the per-runtime state (database, model) built from them."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import Model
from thoth_core.config import declared_keys, unknown
from thoth_core.sections import home_sections

from .memory import MemoryFile
from .policy import DEFAULT_AUTO_APPLY, check_policy  # not .tiers: its word tables compile in ~20 ms
from .store import Store

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

NAME = "reflection"
THIRD_PARTY_CHOICES = ("hold", "drop")


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
    reflexion_dir: str = ""  # where approved reflexion records go; default: [plugins.procedural] reflexion_dir
    draft_reflexion: bool = True  # draft a reflexion record (for approval) about each failed turn
    snapshot_tokens: int = 600  # the memory snapshot never grows past this
    transient_days: int = 14  # reflection and validation records are pruned after this many days
    transient_max: int = 200  # ... and beyond this many records, oldest first (about 14 days of a busy agent)
    auto_apply: list[str] = field(default_factory=lambda: list(DEFAULT_AUTO_APPLY))  # risk tiers applied unreviewed
    third_party: str = "hold"  # proposals about other people: "hold" them for review or "drop" them

    @classmethod
    def from_runtime(cls, runtime: Runtime) -> Settings:
        """Read and check the table; raises ConfigError naming the bad key."""
        table = runtime.config.plugin(NAME)
        known = {f.name for f in fields(cls)}
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key not in known:  # a core key (deadline, ...); the core refuses unknown ones (CONFIG_DEFAULTS)
                continue
            where, default = f"plugins.{NAME}.{key}", getattr(cls(), key)
            if isinstance(default, int) and not isinstance(default, bool):
                values[key] = runtime.config.integer(where, value, low=1, high=LIMIT)
                continue
            if isinstance(default, float):
                values[key] = runtime.config.number(where, value, positive=True, high=LIMIT)
                continue
            expected = type(default) if default is not None else str
            if isinstance(value, bool) is not (expected is bool) or not isinstance(value, expected):
                raise runtime.config.error(where, f"expected {_describe(expected)}, got {value!r}")
            if isinstance(value, str) and not value.strip():
                raise runtime.config.error(where, f"expected a non-empty string, got {value!r}")
            values[key] = value
        _check_model_options(runtime, values.get("model") or runtime.model_name(), values.get("model_options", {}))
        problem = check_policy(values.get("auto_apply", list(DEFAULT_AUTO_APPLY)))
        if problem:
            raise runtime.config.error(f"plugins.{NAME}.auto_apply", problem)
        if values.get("third_party", "hold") not in THIRD_PARTY_CHOICES:
            choices = ", ".join(THIRD_PARTY_CHOICES)
            got = values["third_party"]
            raise runtime.config.error(f"plugins.{NAME}.third_party", f"expected {choices}, got {got!r}")
        persona = str(runtime.config.get("plugins.procedural.persona_dir") or "persona")
        defaults = {
            "memory_file": runtime.config.get("plugins.working.memory_file") or f"{persona}/MEMORY.md",
            "observations_file": f"{persona}/RULES.md",
            "knowledge_dir": runtime.config.get("plugins.procedural.knowledge_dir") or "knowledge",
            "reflexion_dir": runtime.config.get("plugins.procedural.reflexion_dir") or "reflexion",
        }
        for key, default in defaults.items():
            values[key] = values.get(key) or str(default)
        return cls(**values)

    def expiry_before(self, runtime: Runtime, now: float) -> float:
        """The `before` passed to `expiring_records`: now minus episodic retention, or now (the owner decides)."""
        days = runtime.config.get("plugins.episodic.retention_days")
        numeric = isinstance(days, (int, float)) and not isinstance(days, bool) and days > 0
        return now - float(days) * 86400 if numeric else now


def _check_model_options(runtime: Runtime, provider: str | None, options: dict[str, Any]) -> None:
    """Refuse a model_options key the provider does not declare, as the core does in its `[models.NAME]`."""
    known = declared_keys(runtime.pm.get_plugins()).get(f"models.{provider}")
    strange = sorted(options.keys() - known) if known is not None else []
    if strange:
        where = f"plugins.{NAME}.model_options.{strange[0]}"
        raise runtime.config.error(where, unknown(strange[0], sorted(known or ()), f"key of [models.{provider}]"))


def _describe(expected: Any) -> str:
    names = {str: "a string", dict: "a table", bool: "true or false", list: "a list"}
    return names.get(expected, expected.__name__)


def _declared() -> dict[str, Any]:
    """Every key of the table, from the Settings fields, with its default (None: derived at run time)."""
    values = {f.name: getattr(Settings(), f.name) for f in fields(Settings)}
    return {key: None if value in ("", {}) else value for key, value in values.items()}


LIMIT = 10_000_000  # no count of tokens or days is this large but by mistake
CONFIG_DEFAULTS = {f"plugins.{NAME}": _declared()}  # the core refuses any other key of [plugins.reflection]


class State:
    """What reflection keeps per runtime: settings, database, the reflection model."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = Settings.from_runtime(runtime)
        self.dir = Path(runtime.home) / NAME
        self.store = Store(self.dir / "reflection.db", runtime.config)  # or the shared store: `[storage] url`
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

    def memory(self) -> MemoryFile:
        """The persona memory file, its sections where the home keeps them (the shared store, with `[storage] url`)."""
        return MemoryFile(self.path(self.settings.memory_file), home_sections(self.runtime))

    @property
    def founders(self) -> list[str]:
        """`[thoth] founders`: told of persona observations, known peers (who decides: `thoth_core.approvals`)."""
        return [str(f) for f in self.runtime.config.get("thoth.founders") or []]

    def close(self) -> None:
        """Close the database."""
        self.store.close()


def state(runtime: Runtime) -> State:
    """Reflection's state for this runtime."""
    return runtime.plugin_state(NAME, lambda: State(runtime))  # type: ignore[no-any-return]
