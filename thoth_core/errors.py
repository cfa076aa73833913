"""Errors Thoth raises on purpose; each message is one line a user can act on."""

from __future__ import annotations


class ThothError(Exception):
    """Base class; the CLI prints the message and exits 2."""


class ConfigError(ThothError):
    """Bad configuration, shown to the user with the file, line or key at fault."""


class PluginError(ThothError):
    """A plugin failed to load or misbehaved; names the plugin."""

    def __init__(self, plugin_name: str, message: str) -> None:
        super().__init__(f"plugin {plugin_name!r}: {message}")
        self.plugin_name = plugin_name


class ModelNotConfigured(ThothError):
    """No model provider is usable; the message says how to configure one."""


class ModelError(ThothError):
    """The model provider failed to answer a turn."""


class InputError(ThothError):
    """A name or message a person or frontend gave that cannot be used; says which and why (nothing was kept)."""


class ToolLimit(ThothError):
    """A tool call past the turn's limits (calls, seconds): not run; the model is told and answers without tools."""
