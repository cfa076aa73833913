"""Thoth: a five-layer memory runtime for chat agents, built from pluggy plugins."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .answers import InvalidAnswer, ask_for
from .budget import Assembly, count_tokens
from .errors import ConfigError, ModelError, ModelNotConfigured, PluginError, ThothError
from .hookspecs import HookPolicy, hookimpl, hookspec
from .manager import PluginInfo, ThothPluginManager
from .models import Model, ModelRequest, complete
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

if TYPE_CHECKING:
    from .runtime import Runtime, TurnResult


def __getattr__(name: str) -> Any:
    """`Runtime` and `TurnResult` load with the pipeline on first use: `import thoth_core` stays quick (CLI start)."""
    if name in ("Runtime", "TurnResult"):
        from . import runtime

        return getattr(runtime, name)
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
