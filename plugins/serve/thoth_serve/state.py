"""What one service process holds beside its app: the runtime, the pin, the event bus and the metrics."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thoth_core.scope import Scope

from .events import EventBus
from .metrics import Metrics
from .options import ServeOptions

if TYPE_CHECKING:
    from thoth_core import Runtime

STATE = "serve"  # the runtime's plugin_state key of the event bus (the `notify` hook publishes to it)


@dataclass
class ServeState:
    """The service's runtime and what the routes share; `app.state.serve`."""

    runtime: Runtime
    options: ServeOptions
    scope: Scope
    metrics: Metrics = field(default_factory=Metrics)
    turns: set[asyncio.Future[Any]] = field(default_factory=set)  # turns still running (a client may have left)

    @classmethod
    def of(cls, runtime: Runtime, options: ServeOptions) -> ServeState:
        """The state for a runtime, pinned as the options say."""
        default = str(runtime.config.get("thoth.workspace"))
        return cls(runtime, options, Scope(peer=options.peer, workspace=options.workspace, default_workspace=default))

    @property
    def events(self) -> EventBus:
        """The runtime's event bus (shared with the plugin's `notify` hook)."""
        return bus_of(self.runtime)


def bus_of(runtime: Runtime) -> EventBus:
    """The event bus of a runtime, made on first use."""
    bus: EventBus = runtime.plugin_state(STATE, EventBus)
    return bus


__all__ = ["STATE", "ServeState", "bus_of"]
