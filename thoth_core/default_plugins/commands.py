"""Built-in slash commands: /help, /done, /whoami, /layers."""

from __future__ import annotations

from typing import Any

from thoth_core import hookimpl
from thoth_core.runtime import Command


def _help(runtime: Any, **_: Any) -> str:
    return "\n".join(f"/{c.name}{' ' + c.usage if c.usage else ''} - {c.help}" for c in sorted(runtime.commands.values(), key=lambda c: c.name))


async def _done(runtime: Any, session: Any, **_: Any) -> str:
    await runtime.end_session(session, "done")
    return "Session ended; reflection (if enabled) runs in the background."


def _whoami(session: Any, **_: Any) -> str:
    return f"peer {session.peer} in workspace {session.workspace}, thread {session.thread} (session {session.id})"


async def _layers(runtime: Any, session: Any, **_: Any) -> str:
    lines = []
    for status in await runtime.status(peer=session.peer, workspace=session.workspace):
        counts = ", ".join(f"{k} {v}" for k, v in status.items() if k not in ("layer", "plugin"))
        lines.append(f"{status.get('layer', status['plugin'])}: {counts}")
    return "\n".join(lines) or "no layer reports any status"


@hookimpl
def register_commands(register):  # type: ignore[no-untyped-def]
    register(Command("help", "list the slash commands", _help))
    register(Command("done", "end this session (reflection runs on it)", _done))
    register(Command("whoami", "who and where you are", _whoami))
    register(Command("layers", "what each memory layer holds", _layers))
