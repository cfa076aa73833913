"""The hook of the service's world, declared by this plugin (`add_hookspecs`), not by the core.

Other distributions implement it with `@hookimpl(optionalhook=True)` and import starlette inside
the hook, so they still load when thoth-serve is not installed; `POLICIES` tells the core's
dispatcher how it is called (on the service's thread, each plugin isolated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from thoth_core import HookPolicy, hookspec

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.scope import Scope

POLICIES = {"serve_routes": HookPolicy("sync", "none")}


@hookspec
def serve_routes(register: Callable[[Any], None], runtime: Runtime, scope: Scope) -> None:
    """Add routes to `thoth serve`: call `register(route)` with a `starlette.routing.BaseRoute` for each.

    Called once per service process after its runtime is loaded, before it answers a request.
    A registered route whose app is a Starlette application (a `Route` or `Mount` of one) gets its
    lifespan run inside the service's (e.g. the MCP session manager). The service's own `/v1` routes
    come first; the service's auth, Host and CORS rules apply to every route.

    Args:
        register: Takes one route; call it as often as needed.
        runtime: The service's runtime, for the routes' handlers.
        scope: The service's pin (`--peer`, `--workspace`): routes that serve a peer's memory apply it.
    """
