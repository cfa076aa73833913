"""The `mcp` plugin: adds `thoth mcp`, an MCP server over the runtime's memory (no hooks of a layer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import hookimpl

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.scope import Scope

CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {"plugins.mcp": {}}  # no keys of its own: the core refuses any but its own


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import mcp

    cli.add_command(mcp)


@hookimpl(optionalhook=True)  # declared by thoth-serve (`serve_routes`); ignored where it is not installed
def serve_routes(register: Any, runtime: Runtime, scope: Scope) -> None:
    """MCP's streamable HTTP transport at /mcp of `thoth serve`, pinned as the service is (its lifespan runs inside
    the service's)."""
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.routing import Route

    from .serve import HTTP_PATH
    from .server import build_server

    app = build_server(runtime, scope).streamable_http_app(
        streamable_http_path=HTTP_PATH,
        # the service checks Host (loopback) and the token for every route; MCP's own check knows no other bind
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    register(Route(HTTP_PATH, endpoint=app))
