"""The `serve` plugin: adds `thoth serve`, declares `serve_routes`, a doctor line, and live events from `notify`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import hookimpl

from . import hookspecs

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.manager import ThothPluginManager

CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {"plugins.serve": {}}  # no keys of its own: options are flags
EVENTS = {"approval_requested": "approval"}  # notify event -> the /v1/events name, where they differ


@hookimpl
def add_hookspecs(pluginmanager: ThothPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import serve

    cli.add_command(serve)


@hookimpl
async def notify(event: str, payload: dict[str, Any], runtime: Runtime) -> None:
    """Pass the runtime's notices on to /v1/events subscribers of this process (none outside a service)."""
    from .state import bus_of

    bus = bus_of(runtime)
    if bus.subscribers:
        bus.publish(EVENTS.get(event, event), {**payload, "event": event})


@hookimpl
def doctor_checks(runtime: Runtime) -> list[tuple[bool | None, str]]:
    """Whether a service runs for this home and answers /v1/health."""
    from .doctor import service_line

    return [service_line(runtime.home)]
