"""`thoth.toml`: loading, validation with file/line/key errors, secrets by reference, writing.

The core validates its own keys (`[thoth]`, `[budget]`, `[plugins]`, `[privacy]`). Plugins declare the keys of
their `[plugins.NAME]` and `[models.NAME]` tables in `CONFIG_DEFAULTS` (`check_plugin_tables`
refuses any other) and check the values themselves, numbers through `Config.number`/`integer`.
Secrets are never values in the file, only references: `api_key = { "$env" = "ANTHROPIC_API_KEY" }`
or `{ "$file" = "/run/secrets/key" }`.
"""

from __future__ import annotations

import difflib
import math
import os
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .inputs import name_problem
from .pii_rules import PII_KINDS
from .types import DEFAULT_AGENT, LAYERS

CONFIG_NAME = "thoth.toml"  # the file that makes a folder an agent home
ESSENTIAL = frozenset({"working", "procedural"})

DEFAULTS: dict[str, Any] = {
    "thoth": {
        "workspace": "default",
        "agent": DEFAULT_AGENT,
        "deadline": 2.0,
        "background_deadline": 300.0,
        "exit_deadline": 5.0,
        "idle_minutes": 30.0,
        "max_tokens": 1024,
        "embedder": "minilm",
        "tool_calls": 6,
        "tool_seconds": 30.0,
    },
    "budget": {
        "total": 6000,
        "history": 4000,
        "message": 8000,
        "per_plugin": 800,
        "tools": 3000,
        "layers": {"working": 1000, "identity": 800, "episodic": 1200, "procedural": 2500, "reflection": 400},
    },
    "plugins": {"disabled": []},
    # what `thoth bundle import` accepts (MiB; the gzip ratio of each large member and of the whole): bundle.Limits
    "bundle": {"max_file_mb": 16, "max_section_mb": 2048, "max_total_mb": 4096, "max_ratio": 100},
    "privacy": {"pii": list(PII_KINDS)},  # pii_rules.DEFAULT_PII: every kind
}

# Upper bounds beyond which a token count is surely a mistake.
LIMITS = {f"budget.{key}": 10_000_000 for key in ("total", "history", "message", "per_plugin", "tools")} | {
    "thoth.max_tokens": 10_000_000,
    "thoth.tool_calls": 1000,
}
DAY = 86_400
# Upper bounds of times (1e308 seconds overflow a timer): a day of seconds, a year of idle minutes.
TIME_LIMITS = {"thoth.deadline": DAY, "thoth.background_deadline": DAY, "thoth.exit_deadline": DAY}
TIME_LIMITS |= {"thoth.tool_seconds": DAY}
TIME_LIMITS |= {"thoth.idle_minutes": 366 * 24 * 60}

# key -> (type, description) for the keys the core owns.
SCHEMA: dict[str, tuple[type | tuple[type, ...], str]] = {
    "thoth.workspace": (str, "a string"),
    "thoth.agent": (str, "an agent name"),
    "thoth.model": (str, "a model provider name"),
    "thoth.frontend": (str, "a frontend name"),
    "thoth.deadline": ((int, float), "a number of seconds"),
    "thoth.background_deadline": ((int, float), "a number of seconds"),
    "thoth.exit_deadline": ((int, float), "a number of seconds"),
    "thoth.idle_minutes": ((int, float), "a number of minutes"),
    "thoth.max_tokens": (int, "an integer"),
    "thoth.tool_calls": (int, "an integer (tool calls the model may make in one turn)"),
    "thoth.tool_seconds": ((int, float), "a number of seconds (for all of a turn's tool calls)"),
    "thoth.embedder": (str, "an embedder name (none: recall matches words only)"),
    "thoth.home": (str, "a path"),
    "thoth.founders": (list, "a list of people (frontend user ids or names)"),
    "thoth.owner": (str, "a person's name (who decides approvals when founders is empty)"),
    "budget.total": (int, "an integer"),
    "budget.history": (int, "an integer"),
    "budget.message": (int, "an integer"),
    "budget.per_plugin": (int, "an integer"),
    "budget.tools": (int, "an integer (tokens of tool results in one turn)"),
    "budget.layers": (dict, "a table of per-layer token budgets"),
    "plugins.disabled": (list, "a list of plugin names"),
    "privacy.pii": (list, "a list of personal data kinds to redact"),
    "storage.url": ((str, dict), 'a postgresql:// URL, or { "$env" = "VARIABLE" } naming one'),
    "bundle.max_file_mb": ((int, float), "a number of megabytes"),
    "bundle.max_section_mb": ((int, float), "a number of megabytes"),
    "bundle.max_total_mb": ((int, float), "a number of megabytes"),
    "bundle.max_ratio": ((int, float), "a compression ratio"),
}


AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
AGENT_RULE = "1 to 64 letters, digits, '_', '-' or '.', starting with a letter or digit"


def agent_of(config: Config) -> str:
    """The agent this process is: `$THOTH_AGENT`, else `[thoth] agent`; a bad name raises one ConfigError line."""
    named = os.environ.get("THOTH_AGENT", "").strip()
    if named and not AGENT_NAME.fullmatch(named):
        raise ConfigError(f"THOTH_AGENT: expected an agent name ({AGENT_RULE}), got {named!r}")
    return named or configured_agent(config)


def configured_agent(config: Config) -> str:
    """`[thoth] agent` (DEFAULT_AGENT when unset); a bad name raises a ConfigError naming `thoth.agent`."""
    value = config.get("thoth.agent", DEFAULT_AGENT)
    if not isinstance(value, str) or not AGENT_NAME.fullmatch(value):
        raise config.error("thoth.agent", f"expected an agent name ({AGENT_RULE}), got {value!r}")
    return value


def find_config(start: Path | None = None) -> Path | None:
    """The nearest `thoth.toml` in start (default: the working directory) or its parents."""
    folder = (start or Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        if (candidate / CONFIG_NAME).is_file():
            return candidate / CONFIG_NAME
    return None


def config_path() -> Path:
    """Where the config file is: `$THOTH_CONFIG`, else the nearest `thoth.toml` upwards, else `./thoth.toml`."""
    if os.environ.get("THOTH_CONFIG"):
        return Path(os.environ["THOTH_CONFIG"])
    return find_config() or Path(CONFIG_NAME)


@dataclass
class Config:
    """The loaded configuration; `data` holds the file's values merged over the defaults."""

    data: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    text: str = ""
    fallback_root: Path | None = None  # the project folder when there is no file (the runtime sets its home)
    declared: dict[str, dict[str, Any]] = field(default_factory=dict)  # table -> the loaded plugins' defaults

    def get(self, key: str, default: Any = None) -> Any:
        """The value at a dotted key such as `budget.total`, or default."""
        node: Any = self.merged
        for part in key.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @cached_property
    def merged(self) -> dict[str, Any]:
        """The file's values over the plugins' declared defaults over the core's."""
        return _merged(_merged(DEFAULTS, _nested(self.declared)), self.data)

    def declare(self, plugins: Iterable[object]) -> None:
        """Take the plugins' `CONFIG_DEFAULTS` as defaults of their tables (`get`, `plugin`, `section` merge them)."""
        self.declared = _merged(self.declared, declared_defaults(plugins))
        self.__dict__.pop("merged", None)  # the cached_property, read again with the new defaults

    @property
    def root(self) -> Path:
        """The agent home: where thoth.toml lives (without one, the data home, else the working directory)."""
        if self.path:
            return self.path.parent.resolve()
        return self.fallback_root or Path.cwd()

    def plugin(self, name: str) -> dict[str, Any]:
        """A plugin's own `[plugins.NAME]` table over its declared defaults, secrets resolved."""
        return self.section(f"plugins.{name}")

    def section(self, key: str) -> dict[str, Any]:
        """Any table, e.g. `models.anthropic`, over its declared defaults, secrets resolved."""
        table: dict[str, Any] = resolve_secrets(self.get(key, {}), where=key, source=self.source)
        return table

    @property
    def source(self) -> str:
        """The file name used in error messages."""
        return str(self.path) if self.path else "thoth.toml"

    def error(self, key: str, message: str) -> ConfigError:
        """A one-line error naming file, line (when found) and key."""
        line = line_of(self.text, key)
        where = f"{self.source}:{line}" if line else self.source
        return ConfigError(f"{where}: {key}: {message}")

    def number(
        self, key: str, value: Any, *, low: float = 0.0, high: float = math.inf, positive: bool = False
    ) -> float:
        """value, read from key, as a finite number from low to high (above 0 when positive); else a ConfigError."""
        return float(_checked(self, key, value, low=low, high=high, positive=positive, integer=False))

    def integer(self, key: str, value: Any, *, low: int = 0, high: float = math.inf) -> int:
        """value, read from key, as an integer from low to high; else a ConfigError."""
        return int(_checked(self, key, value, low=low, high=high, positive=False, integer=True))

    @property
    def disabled(self) -> list[str]:
        """Plugin names switched off in `[plugins] disabled`."""
        return list(self.get("plugins.disabled", []))

    @property
    def layer_budgets(self) -> dict[str, int]:
        """Per-layer token budgets from `[budget.layers]`."""
        return dict(self.get("budget.layers", {}))


def load_config(path: Path | None = None) -> Config:
    """Read and validate the config file; a missing file means all defaults."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get("THOTH_CONFIG"):
            raise ConfigError(f"{path}: config file not found (named by THOTH_CONFIG)")
        return Config(path=None)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    config = Config(data=parse(text, path), path=path, text=text)
    validate(config)
    return config


def parse(text: str, path: Path) -> dict[str, Any]:
    """TOML text as a dict; a syntax error becomes a one-line ConfigError with file and line."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        where = f"{path}:{match.group(1)}" if match else str(path)
        raise ConfigError(f"{where}: invalid TOML: {str(exc).split(' (at line')[0]}") from exc


SECRET_KEY = re.compile(r"(key|token|secret|password)$", re.IGNORECASE)


def literal_secrets(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys that name a secret (`api_key`, `bot_token`, ...) but hold a literal string."""
    found = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            found += literal_secrets(value, f"{dotted}.")
        elif isinstance(value, str) and value.strip() and SECRET_KEY.search(key):
            found.append(dotted)
    return found


SECTIONS = ("thoth", "budget", "plugins", "models", "privacy", "storage", "bundle")


def unknown(name: str, known: list[str], what: str) -> str:
    """`unknown section; did you mean [thoth]?`: the message for a name that is not among the known ones."""
    close = difflib.get_close_matches(name, known, n=1)
    return f"unknown {what}" + (f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(sorted(known))}")


def validate(config: Config) -> None:
    """Check the core's own keys; raises ConfigError on the first bad one."""
    for section in config.data:
        if section not in SECTIONS:
            raise config.error(section, unknown(section, list(SECTIONS), "section"))
    for section in SECTIONS:
        if section in config.data and not isinstance(config.data[section], dict):
            raise config.error(section, "expected a table")
    for section in ("thoth", "budget", "privacy", "storage", "bundle"):
        known = [key.split(".", 1)[1] for key in SCHEMA if key.startswith(f"{section}.")]
        for key in config.data.get(section, {}):
            if key not in known:
                raise config.error(f"{section}.{key}", unknown(key, known, f"key in [{section}]"))
    for key, (kind, description) in SCHEMA.items():
        value = config.get(key)
        if value is None:
            continue
        if not isinstance(value, kind) or isinstance(value, bool):
            raise config.error(key, f"expected {description}, got {value!r}")
    configured_agent(config)
    for key in (
        "thoth.deadline",
        "thoth.background_deadline",
        "thoth.exit_deadline",
        "thoth.idle_minutes",
        "thoth.max_tokens",
        "thoth.tool_calls",
        "thoth.tool_seconds",
        "budget.total",
        "budget.history",
        "budget.message",
        "budget.per_plugin",
        "budget.tools",
    ):
        limit = LIMITS.get(key, math.inf)
        if config.get(key) is not None and not 0 < config.get(key) < limit:
            bound = f"below {limit:,}" if limit < math.inf else "finite"
            raise config.error(key, f"must be positive and {bound}, got {config.get(key)!r}")
    for key, limit in TIME_LIMITS.items():
        if config.get(key) is not None and config.get(key) > limit:
            unit = "minutes" if key.endswith("minutes") else "seconds"
            raise config.error(key, f"must be at most {limit:,} {unit}, got {config.get(key)!r}")
    for key in ("thoth.workspace", "thoth.owner"):
        problem = name_problem(config.get(key)) if config.get(key) is not None else None
        if problem:
            raise config.error(key, f"{problem}, got {config.get(key)!r}")
    for person in config.get("thoth.founders") or []:
        problem = name_problem(person)
        if problem:
            raise config.error("thoth.founders", f"each founder {problem}, got {person!r}")
    for key in ("bundle.max_file_mb", "bundle.max_section_mb", "bundle.max_total_mb"):
        config.number(key, config.get(key), positive=True, high=1 << 30)  # up to a petabyte
    config.number("bundle.max_ratio", config.get("bundle.max_ratio"), low=1, high=1e6)
    for key, value in config.get("budget.layers", {}).items():
        if key not in LAYERS:
            raise config.error(f"budget.layers.{key}", f"unknown layer; expected one of {', '.join(LAYERS)}")
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise config.error(f"budget.layers.{key}", f"expected a non-negative integer, got {value!r}")
    for kind in config.get("privacy.pii"):
        if kind not in PII_KINDS:
            raise config.error("privacy.pii", f"unknown kind {kind!r}; known: {', '.join(PII_KINDS)}")
    for name, table in config.data.get("models", {}).items():
        if not isinstance(table, dict):
            raise config.error(f"models.{name}", "expected a table of provider settings")
    for name in config.disabled:
        if not isinstance(name, str):
            raise config.error("plugins.disabled", f"expected plugin names, got {name!r}")
        if name in ESSENTIAL:
            raise config.error(
                "plugins.disabled",
                f"plugin {name!r} is essential (L1 working and L4 procedural always run) and cannot be disabled",
            )
    if re.search(r"://[^/@:]*:[^/@]+@", str(config.get("storage.url", ""))):
        raise config.error("storage.url", 'a password is a secret, not a value: url = { "$env" = "THOTH_STORAGE_URL" }')
    for key in literal_secrets(config.data):
        leaf = key.rsplit(".", 1)[-1]
        raise config.error(key, f'secrets are references, not values: {leaf} = {{ "$env" = "VARIABLE" }}')
    for name, table in config.data.get("plugins", {}).items():
        if name == "disabled":
            continue
        if not isinstance(table, dict):
            raise config.error(f"plugins.{name}", "expected a table")
        for key in ("deadline", "background_deadline"):
            value = table.get(key)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= DAY
            ):
                raise config.error(
                    f"plugins.{name}.{key}", f"expected a positive number of seconds up to 86,400, got {value!r}"
                )


def declared_defaults(plugins: Iterable[object]) -> dict[str, dict[str, Any]]:
    """Table (`plugins.NAME`, `models.NAME`) -> the defaults the plugins' `CONFIG_DEFAULTS` give (None: no default)."""
    defaults: dict[str, dict[str, Any]] = {}
    for plugin in plugins:
        for table, values in (getattr(plugin, "CONFIG_DEFAULTS", None) or {}).items():
            defaults.setdefault(table, {}).update({key: value for key, value in values.items() if value is not None})
    return defaults


def with_plugin_defaults(config: Config, plugins: list[object]) -> dict[str, Any]:
    """The file's values over each plugin module's `CONFIG_DEFAULTS` (a `Config` of it adds the core's)."""
    return _merged(_nested(declared_defaults(plugins)), config.data)


# Keys every `[plugins.NAME]` table accepts; the core reads and checks them (`validate`).
PLUGIN_CORE_KEYS = ("deadline", "background_deadline")


def declared_keys(plugins: Iterable[object]) -> dict[str, set[str]]:
    """Table (`plugins.NAME`, `models.NAME`) -> the keys the plugins' `CONFIG_DEFAULTS` declare for it."""
    declared: dict[str, set[str]] = {}
    for plugin in plugins:
        for table, values in (getattr(plugin, "CONFIG_DEFAULTS", None) or {}).items():
            declared.setdefault(table, set()).update(values)
    return declared


def check_plugin_tables(config: Config, plugins: Iterable[object]) -> None:
    """Refuse a key of a declared `[plugins.NAME]` or `[models.NAME]` table that no loaded plugin declares.

    The plugins' defaults are then the config's (`Config.declare`): each plugin reads its table without repeating them.
    """
    plugins = list(plugins)
    config.declare(plugins)
    declared = declared_keys(plugins)
    for section in ("plugins", "models"):
        for name, table in (config.data.get(section) or {}).items():
            keys = declared.get(f"{section}.{name}")
            if keys is None or not isinstance(table, dict):
                continue  # undeclared (a plugin that declares nothing, or one not installed): its own business
            known = sorted(keys | set(PLUGIN_CORE_KEYS)) if section == "plugins" else sorted(keys)
            for key in table:
                if key not in known:
                    where = f"{section}.{name}"
                    raise config.error(f"{where}.{key}", unknown(key, known, f"key in [{where}]"))


def _checked(config: Config, key: str, value: Any, *, low: float, high: float, positive: bool, integer: bool) -> Any:
    number = not isinstance(value, bool) and isinstance(value, int if integer else (int, float))
    finite = number and not (isinstance(value, float) and not math.isfinite(value))
    if finite and low <= value <= high and not (positive and value == low):
        return value
    noun = "integer" if integer else "number"
    if low == 0 or (integer and low == 1 and not positive):
        expected = f"a {'positive' if positive or low else 'non-negative'} {noun}"
        expected += f" up to {_figure(high)}" if high < math.inf else ""
    else:
        expected = f"{'an' if integer else 'a'} {noun} {'above' if positive else 'of at least'} {_figure(low)}"
        expected += f" and up to {_figure(high)}" if high < math.inf else ""
    raise config.error(key, f"expected {expected}, got {value!r}")


def _figure(number: float) -> str:
    return f"{int(number):,}" if float(number).is_integer() else f"{number:g}"


def missing_plugins(config: Config, known: set[str]) -> dict[str, str]:
    """Plugins the file names that are neither installed nor built in: name -> the key naming it."""
    named = [("plugins.disabled", n) for n in config.disabled]
    named += [(f"plugins.{n}", n) for n in config.data.get("plugins", {}) if n != "disabled"]
    return {name: key for key, name in reversed(named) if name not in known}


def resolve_secrets(value: Any, *, where: str, source: str = "thoth.toml") -> Any:
    """Replace `{"$env": NAME}` and `{"$file": PATH}` references by their values."""
    if isinstance(value, dict):
        if set(value) == {"$env"}:
            return os.environ.get(value["$env"])
        if set(value) == {"$file"}:
            try:
                return Path(value["$file"]).expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(f"{source}: {where}: cannot read secret file {value['$file']}: {exc}") from exc
        return {k: resolve_secrets(v, where=f"{where}.{k}", source=source) for k, v in value.items()}
    return value


def line_of(text: str, key: str) -> int | None:
    """The 1-based line where a dotted key is set in TOML text, if it can be found."""
    *sections, leaf = key.split(".")
    section, current = ".".join(sections), ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        header = re.match(r"\[+\s*([^\]]+?)\s*\]+", stripped)
        if header:
            current = header.group(1).replace('"', "")
            if current == key:
                return number
            continue
        match = re.match(r"([\w\-\".]+)\s*=", stripped)
        if match:
            full = ".".join(p for p in (current, match.group(1).replace('"', "")) if p)
            if full == key or (current == section and match.group(1) == leaf):
                return number
    return None


def _nested(tables: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`{"plugins.x": {...}}` as `{"plugins": {"x": {...}}}`."""
    nested: dict[str, Any] = {}
    for table, values in tables.items():
        node = nested
        for part in table.split("."):
            node = node.setdefault(part, {})
        node.update(values)
    return nested


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merged(merged[key], value)
        else:
            merged[key] = value
    return merged


def set_value(path: Path, key: str, raw: str, *, check: Callable[[Config], None] | None = None) -> Any:
    """Set a dotted key in the file (creating it), parsing raw as TOML when it parses; comments and layout stay.

    The file is written only when the new config passes `validate` and check (e.g. the plugins' checks at start-up).
    """
    import tomlkit
    from tomlkit.exceptions import ParseError

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    parse(text, path)  # a broken file is reported as usual, naming its line
    document = tomlkit.parse(text)
    try:
        value = tomlkit.parse(f"v = {raw}")["v"]
    except ParseError:
        value = raw
    node: Any = document
    *parents, leaf = key.split(".")
    for part in parents:
        if part not in node:
            node[part] = tomlkit.table()
        node = node[part]
        if not isinstance(node, dict):
            raise ConfigError(f"{path}: {key}: {part} is not a table")
    plain = value.unwrap() if hasattr(value, "unwrap") else value
    if SECRET_KEY.search(leaf) and not (isinstance(plain, dict) and set(plain) <= {"$env", "$file"}):
        raise ConfigError(f'{path}: {key}: secrets are references, not values: {key} = {{ "$env" = "VARIABLE" }}')
    node[leaf] = value
    candidate = Config(data=document.unwrap(), path=path, text=text)  # errors name the lines of the file as it is
    validate(candidate)
    if check is not None:
        check(candidate)
    path.write_text(tomlkit.dumps(document).rstrip("\n") + "\n", encoding="utf-8")
    return plain
