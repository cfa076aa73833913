"""Thoth: a five-layer memory runtime for chat agents, built from pluggy plugins."""

from __future__ import annotations

from importlib import import_module

TYPE_CHECKING = False  # as typing.TYPE_CHECKING (mypy reads the name), without importing typing (about 5 ms)
if TYPE_CHECKING:
    from typing import Any

    from .answers import InvalidAnswer, ask_for
    from .budget import Assembly, count_tokens
    from .errors import ConfigError, ModelError, ModelNotConfigured, PluginError, ThothError, ToolLimit
    from .hookspecs import HookPolicy, hookimpl, hookspec
    from .manager import PluginInfo, ThothPluginManager
    from .models import Model, ModelRequest, complete
    from .runtime import Runtime, TurnResult
    from .types import (
        LAYERS,
        SEFIROT,
        ApprovalItem,
        BundleSection,
        CheckIn,
        Command,
        ContextBlock,
        Cut,
        DoctorLine,
        ForgetReceipt,
        LastThread,
        LayerStatus,
        MemoryRecord,
        Message,
        PluginCall,
        RecallHit,
        Register,
        RegisterCommand,
        Reply,
        Session,
        ToolDefinition,
        Turn,
        Usage,
    )

# Where each public name lives, in the order looked in: `import thoth_core` imports none of them, so a process
# that needs only a light module (the thin clients of `thoth serve`: thoth_core.service) skips pluggy, the types
# and the pipeline; each name loads its module on first use.
SOURCES = ("errors", "hookspecs", "types", "answers", "budget", "manager", "models", "runtime")


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use (`import thoth_core` stays quick: thin clients, CLI)."""
    if name in __all__:
        for source in SOURCES:
            module = import_module(f".{source}", __name__)
            if hasattr(module, name):
                value = getattr(module, name)
                globals()[name] = value
                return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "LAYERS",
    "SEFIROT",
    "ApprovalItem",
    "Assembly",
    "BundleSection",
    "CheckIn",
    "Command",
    "ConfigError",
    "ContextBlock",
    "Cut",
    "DoctorLine",
    "ForgetReceipt",
    "HookPolicy",
    "InvalidAnswer",
    "LastThread",
    "LayerStatus",
    "MemoryRecord",
    "Message",
    "Model",
    "ModelError",
    "ModelNotConfigured",
    "ModelRequest",
    "PluginCall",
    "PluginError",
    "PluginInfo",
    "RecallHit",
    "Register",
    "RegisterCommand",
    "Reply",
    "Runtime",
    "Session",
    "ThothError",
    "ThothPluginManager",
    "ToolLimit",
    "ToolDefinition",
    "Turn",
    "TurnResult",
    "Usage",
    "ask_for",
    "complete",
    "count_tokens",
    "hookimpl",
    "hookspec",
]
