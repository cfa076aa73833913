"""The values of plugins' tables (`[plugins.NAME]`, `[models.NAME]`), checked when the plugins load.

A plugin declares its tables' keys and defaults in `CONFIG_DEFAULTS` (a key nobody declares is
refused: `config.check_plugin_tables`), and may give a key a rule in `CONFIG_SCHEMA`:
`{"plugins.hello": {"limit": Number(low=1, high=100, integer=True), "mode": Choice("a", "b")}}`.
Every value the file sets is checked before any command runs, with the same one-line error as the
core's own keys; a key without a rule is held to its default's type (a finite number, a boolean,
a string, a list) once the plugins' `configure` checked what they check themselves. So a value a
plugin reads only when it first opens its store (after a turn was accepted and the model paid
for) is refused at start instead. A secret reference (`{ "$env" = ... }`, `{ "$file" = ... }`) is
not checked here: it is resolved when it is read.
Plugins still check what a rule cannot say (one key against another) in `configure`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from .config import SECRET_KEY
from .inputs import name_problem

if TYPE_CHECKING:
    from .config import Config


class Rule(Protocol):
    """A check of one key's value; raises `config.error(key, ...)` (a ConfigError) when it does not hold."""

    def check(self, config: Config, key: str, value: Any) -> None:
        """Raise a ConfigError naming key (and the file and line) when value breaks the rule."""


@dataclass(frozen=True)
class Number:
    """A finite number from low to high (above low when positive); an integer when integer."""

    low: float = 0.0
    high: float = math.inf
    positive: bool = False
    integer: bool = False

    def check(self, config: Config, key: str, value: Any) -> None:
        """See the class."""
        if self.integer:
            config.integer(key, value, low=int(self.low) + int(self.positive), high=self.high)
        else:
            config.number(key, value, low=self.low, high=self.high, positive=self.positive)


@dataclass(frozen=True)
class Choice:
    """One of a few strings (in any case when `any_case`)."""

    options: tuple[str, ...]
    any_case: bool = False

    def __init__(self, *options: str, any_case: bool = False) -> None:
        object.__setattr__(self, "options", options)
        object.__setattr__(self, "any_case", any_case)

    def check(self, config: Config, key: str, value: Any) -> None:
        """See the class."""
        folded = value.upper() if self.any_case and isinstance(value, str) else value
        if folded not in self.options:
            raise config.error(key, f"expected one of {', '.join(map(repr, self.options))}, got {value!r}")


@dataclass(frozen=True)
class Text:
    """A string of at most max_length characters, or a name (`thoth_core.inputs`: non-empty, printable, bounded)."""

    max_length: int = 4096
    name: bool = False

    def check(self, config: Config, key: str, value: Any) -> None:
        """See the class."""
        if not isinstance(value, str):
            raise config.error(key, f"expected a string, got {value!r}")
        problem = name_problem(value) if self.name else None
        if problem is None and len(value) > self.max_length:
            problem = f"longer than {self.max_length:,} characters"
        if problem:
            raise config.error(key, f"{problem}, got {_shown(value)}")


@dataclass(frozen=True)
class Kind:
    """A value of the same type as the key's default: a finite number, a boolean, a string or a list."""

    default: Any

    def check(self, config: Config, key: str, value: Any) -> None:
        """See the class."""
        if isinstance(self.default, bool):
            if not isinstance(value, bool):
                raise config.error(key, f"expected true or false, got {value!r}")
        elif isinstance(self.default, (int, float)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise config.error(key, f"expected a finite number, got {value!r}")
        elif isinstance(self.default, str) and not isinstance(value, str):
            raise config.error(key, f"expected a string, got {value!r}")
        elif isinstance(self.default, list) and not isinstance(value, list):
            raise config.error(key, f"expected a list, got {value!r}")


def rules_of(plugins: Iterable[object], *, declared_only: bool = False) -> dict[str, Rule]:
    """Dotted key -> its rule: each plugin's `CONFIG_SCHEMA`, else (unless declared_only) its default's type."""
    rules: dict[str, Rule] = {}
    declared: dict[str, Rule] = {}
    for plugin in plugins:
        for table, values in (getattr(plugin, "CONFIG_DEFAULTS", None) or {}).items():
            for key, default in values.items():
                if default is not None and not declared_only:
                    rules.setdefault(f"{table}.{key}", Kind(default))
        for table, values in (getattr(plugin, "CONFIG_SCHEMA", None) or {}).items():
            declared.update({f"{table}.{key}": rule for key, rule in values.items()})
    return rules | declared


def check_plugin_values(config: Config, plugins: Iterable[object], *, declared_only: bool = False) -> None:
    """Check every value the file sets in a plugin's table against its rule; the first bad one raises ConfigError.

    The plugin manager checks the declared rules as it loads; the runtime checks the rest (default types)
    after the plugins' `configure`, whose own messages (with their ranges) come first. Their `CONFIG_DEFAULTS`
    become the config's defaults (`Config.declare`), a plugin registered late included.
    """
    plugins = list(plugins)
    config.declare(plugins)
    rules = rules_of(plugins, declared_only=declared_only)
    for section in ("plugins", "models"):
        for name, table in (config.data.get(section) or {}).items():
            if not isinstance(table, dict):
                continue
            for key, value in table.items():
                dotted = f"{section}.{name}.{key}"
                if value is None or _reference(value):  # None: unset (a config made in Python)
                    continue
                if isinstance(value, dict) and SECRET_KEY.search(key):  # literal strings: config.validate
                    raise config.error(
                        dotted, f'secrets are references: {key} = {{ "$env" = "VARIABLE" }}, got {value!r}'
                    )
                rule = rules.get(dotted)
                if rule is not None:
                    rule.check(config, dotted, value)


def _reference(value: Any) -> bool:
    return isinstance(value, dict) and len(value) == 1 and set(value) <= {"$env", "$file"}


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 60 else f"{value[:40]!r}... ({len(value):,} characters)"


__all__ = ["Choice", "Kind", "Number", "Rule", "Text", "check_plugin_values", "rules_of"]
