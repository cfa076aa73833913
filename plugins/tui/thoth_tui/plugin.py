"""The `tui` frontend plugin: `thoth chat` starts it; plugin notifications show in it."""

from __future__ import annotations

import getpass
from typing import TYPE_CHECKING, Any

from thoth_core import hookimpl

if TYPE_CHECKING:
    from thoth_core import Runtime

CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {"plugins.tui": {}}  # no keys of its own: the core refuses any but its own


def start(runtime: Runtime, *, peer: str | None = None, thread: str | None = None) -> None:
    """Run the terminal app until the person quits; without a thread it reopens the peer's last one."""
    from .app import ThothApp

    ThothApp(runtime, peer=peer or getpass.getuser(), thread=thread).run()


@hookimpl
def register_frontends(register):  # type: ignore[no-untyped-def]
    register("tui", start)


@hookimpl
async def forget(peer: str, thread: str | None, runtime: Runtime) -> dict[str, int] | None:
    """Delete the peer's input history (all of it: its lines do not say which thread they were in)."""
    from .app import Attached
    from .prompt import History, history_path

    app = runtime.plugin_state("tui", Attached).app
    history = app.history if app is not None and app.peer == peer else History(history_path(runtime.home, peer))
    count = history.clear()
    return {"input history lines": count} if count else None


@hookimpl
async def notify(event: str, payload: dict[str, Any], runtime: Runtime) -> None:
    from .app import Attached

    app = runtime.plugin_state("tui", Attached).app
    if app is not None and app.is_running:
        await app.show_notice(event, payload)
