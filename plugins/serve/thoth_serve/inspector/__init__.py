"""The web inspector at `/` of `thoth serve`: each layer's memory of a peer, approvals, forget, plots, live updates."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from thoth_core import hookimpl

if TYPE_CHECKING:
    from thoth_core import Runtime


@hookimpl(optionalhook=True)  # declared by thoth_serve's hookspecs
def serve_routes(register: Any, runtime: Runtime) -> None:
    from .pages import routes

    for route in routes():
        register(route)
