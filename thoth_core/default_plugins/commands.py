"""Built-in slash commands: /help, /done, /whoami, /layers, /approvals, /approve, /reject, /forget."""

from __future__ import annotations

from typing import Any

from thoth_core import hookimpl
from thoth_core.runtime import Command


def _help(runtime: Any, **_: Any) -> str:
    return "\n".join(
        f"/{c.name}{' ' + c.usage if c.usage else ''} - {c.help}"
        for c in sorted(runtime.commands.values(), key=lambda c: c.name)
    )


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


async def _approvals(runtime: Any, **_: Any) -> str:
    items = await runtime.approvals()
    lines = [
        f"{i['id']}  [{i['kind']}] {i['title']}{'  FLAGGED: ' + ', '.join(i['flags']) if i.get('flags') else ''}"
        for i in items
    ]
    return "\n".join(lines) or "nothing is waiting for approval"


async def _approve(runtime: Any, args: str, session: Any, **_: Any) -> str:
    if not args:
        return "usage: /approve ITEM_ID"
    outcome = await runtime.decide(args.split()[0], "approve", actor=session.peer)
    return str(outcome.get("message", f"approved {args.split()[0]}"))


async def _reject(runtime: Any, args: str, session: Any, **_: Any) -> str:
    item, _, reason = args.partition(" ")
    if not item:
        return "usage: /reject ITEM_ID [reason]"
    outcome = await runtime.decide(item, "reject", actor=session.peer, reason=reason.strip())
    return str(outcome.get("message", f"rejected {item}"))


async def _forget(runtime: Any, args: str, session: Any, **_: Any) -> str:
    everything = args.strip() == "all"
    receipt = await runtime.forget(
        peer=session.peer, thread=None if everything else session.thread, workspace=session.workspace
    )
    scope = "everything about you" if everything else "this thread"
    parts = [
        f"{plugin}: " + ", ".join(f"{n} {what}" for what, n in counts.items()) for plugin, counts in receipt.items()
    ]
    return f"Forgot {scope}. " + ("; ".join(parts) or "Nothing was held.")


@hookimpl
def register_commands(register):  # type: ignore[no-untyped-def]
    register(Command("help", "list the slash commands", _help))
    register(Command("done", "end this session (reflection runs on it)", _done))
    register(Command("whoami", "who and where you are", _whoami))
    register(Command("layers", "what each memory layer holds", _layers))
    register(Command("approvals", "list items waiting for approval", _approvals))
    register(Command("approve", "approve a pending item", _approve, usage="ITEM_ID"))
    register(Command("reject", "reject a pending item", _reject, usage="ITEM_ID [reason]"))
    register(Command("forget", "forget this thread (or `all` about you)", _forget, usage="[all]"))
