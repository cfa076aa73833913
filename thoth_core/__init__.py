"""Thoth: a five-layer memory runtime for chat agents, built from pluggy plugins."""

from __future__ import annotations

from .answers import InvalidAnswer, ask_for
from .budget import Assembly, count_tokens
from .errors import ConfigError, ModelError, ModelNotConfigured, PluginError, ThothError
from .hookspecs import hookimpl
from .models import Model, ModelRequest, complete
from .types import LAYERS, SEFIROT, ContextBlock, Cut, Message, PluginCall, Reply, Session, Turn, Usage

__all__ = [
    "LAYERS",
    "SEFIROT",
    "Assembly",
    "ConfigError",
    "ContextBlock",
    "Cut",
    "InvalidAnswer",
    "Message",
    "Model",
    "ModelError",
    "ModelNotConfigured",
    "ModelRequest",
    "PluginCall",
    "PluginError",
    "Reply",
    "Session",
    "ThothError",
    "Turn",
    "Usage",
    "ask_for",
    "complete",
    "count_tokens",
    "hookimpl",
]
