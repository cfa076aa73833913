"""The `[plugins.identity]` table, validated with errors that name the file, line and key."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from thoth_core import ConfigError

if TYPE_CHECKING:
    from thoth_core import Runtime

BACKENDS = ("embedded", "honcho")
KIND_NAMES = {str: "a string", bool: "true or false", dict: "a table"}


@dataclass(frozen=True)
class IdentitySettings:
    """What the identity layer reads from thoth.toml."""

    backend: str = "embedded"
    base_url: str | None = None
    workspace: str = "thoth"
    api_key: str | None = field(default=None, repr=False)
    agent_peer: str = "thoth"
    dialectic_timeout: float = 1.2
    reasoning_level: str | None = None
    write_timeout: float = 5.0
    write_retries: int = 1
    synthesis: bool = False  # a model call before every reply (the dialectic); off: one model call per turn
    derive: bool = True
    top_k: int = 8
    fact_confidence: float = 0.9
    remember_timeout: float = 4.0  # seconds /remember waits for the model's reading (SDK import included); 0: rules
    derive_every: int = 20  # a peer's waiting turns are derived in one model call once this many wait; 1: each turn
    derive_idle: float = 600.0  # seconds a turn may wait before the next write (or a running process's timer) derives
    derive_at_session_end: bool = True  # a session's end derives its peer's waiting turns
    model: str | None = None  # another registered provider for derivation and synthesis (default: the chat model)
    model_options: dict[str, Any] = field(default_factory=dict)  # over [models.<model>], e.g. a cheaper model id


def load_settings(runtime: Runtime) -> IdentitySettings:
    """Read and check `[plugins.identity]`; raises ConfigError naming the bad key."""
    config = runtime.config
    raw = config.get("plugins.identity", {}) or {}

    def error(key: str, message: str) -> ConfigError:
        return config.error(f"plugins.identity.{key}", message)

    if isinstance(raw.get("api_key"), str):
        raise error("api_key", 'never store the key in the file; use api_key = { "$env" = "HONCHO_API_KEY" }')
    table = config.plugin("identity")
    defaults = IdentitySettings()
    values: dict[str, Any] = {}
    for key, kind in (
        ("base_url", str),
        ("workspace", str),
        ("agent_peer", str),
        ("reasoning_level", str),
        ("backend", str),
        ("synthesis", bool),
        ("derive", bool),
        ("derive_at_session_end", bool),
        ("model", str),
        ("model_options", dict),
    ):
        if table.get(key) is None:
            continue
        value = table[key]
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            raise error(key, f"expected {KIND_NAMES.get(kind, kind.__name__)}, got {value!r}")
        values[key] = value
    numbers: dict[str, tuple[Any, dict[str, Any]]] = {  # key -> (the checker, its bounds)
        "dialectic_timeout": (config.number, {"positive": True}),
        "write_timeout": (config.number, {"positive": True, "high": 3600}),
        "write_retries": (config.integer, {"high": 100}),
        "top_k": (config.integer, {"low": 1, "high": 1000}),
        "fact_confidence": (config.number, {"high": 1}),
        "remember_timeout": (config.number, {"high": 30}),
        "derive_every": (config.integer, {"low": 1, "high": 1000}),
        "derive_idle": (config.number, {"high": 366 * 24 * 3600}),
    }
    for key, (check, bounds) in numbers.items():
        if table.get(key) is not None:
            values[key] = check(f"plugins.identity.{key}", table[key], **bounds)
    values["api_key"] = table.get("api_key")
    backend = values.get("backend") or ("honcho" if values.get("base_url") else "embedded")
    if backend not in BACKENDS:
        raise error("backend", f"expected one of {', '.join(BACKENDS)}, got {backend!r}")
    if backend == "honcho" and not values.get("base_url"):
        raise error("base_url", "the honcho backend needs base_url (e.g. http://localhost:8000)")
    values["backend"] = backend
    deadline = runtime.deadline_for("identity")
    timeout = float(values.get("dialectic_timeout", defaults.dialectic_timeout))
    if not 0 < timeout < deadline:
        raise error(
            "dialectic_timeout", f"must be positive and below the layer deadline ({deadline}s), got {timeout!r}"
        )
    return IdentitySettings(**values)


# Every key of [plugins.identity] (the core refuses others), with its default; None: none in the file.
CONFIG_DEFAULTS = {
    "plugins.identity": {
        **{f.name: getattr(IdentitySettings(), f.name) for f in fields(IdentitySettings)},
        "backend": None,  # embedded, or honcho when base_url is set
        "model_options": None,  # a table of the [models.<model>] keys
    }
}
