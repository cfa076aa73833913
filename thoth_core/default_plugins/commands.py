"""Built-in slash commands: /help, /done, /whoami, /layers, /approvals, /approve, /reject, /forget, /recall."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from thoth_core import Command, hookimpl
from thoth_core.budget import Assembly, block_tokens
from thoth_core.types import LAYERS, Session, Turn, layer_label

if TYPE_CHECKING:
    from thoth_core.runtime import Runtime

STATUS_META = ("layer", "plugin")  # status keys that label a row rather than count something


def _help(runtime: Runtime, **_: Any) -> str:
    return "\n".join(
        f"/{c.name}{' ' + c.usage if c.usage else ''} - {c.help}"
        for c in sorted(runtime.commands.values(), key=lambda c: c.name)
    )


async def _done(runtime: Runtime, session: Any, **_: Any) -> str:
    await runtime.end_session(session, "done")
    return "Session ended; reflection (if enabled) runs in the background."


def _whoami(session: Any, **_: Any) -> str:
    return f"peer {session.peer} in workspace {session.workspace}, thread {session.thread} (session {session.id})"


async def session_assembly(runtime: Runtime, session: Session) -> tuple[Assembly, bool]:
    """The session's last assembled context, else one assembled now; True when it is the last turn's."""
    last = runtime.last
    if last is not None and last.session.key == session.key and last.session.id == session.id:
        return last.assembly, True
    probe = copy.copy(session)  # plugins may consume scratch entries (a chosen /skill) while assembling
    probe.scratch = dict(session.scratch)
    text = next((m.content for m in reversed(session.history) if m.role == "user"), "")
    return await runtime.context(Turn(text, session.peer, session.thread, session.workspace), probe), False


def layer_lines(runtime: Runtime, statuses: list[dict[str, Any]], assembly: Assembly) -> list[str]:
    """L1-L5 with used/budget tokens and counts, then every other plugin under its own name."""
    budgets = runtime.config.layer_budgets
    used: dict[str, int] = {}
    own: dict[str, int] = {}
    for block in assembly.blocks:
        used[block.layer] = used.get(block.layer, 0) + block_tokens(block)
        own[block.plugin] = own.get(block.plugin, 0) + block_tokens(block)
    counts = {s["plugin"]: {k: v for k, v in s.items() if k not in STATUS_META} for s in statuses}
    present = {runtime.layer_of(name) for name, _ in runtime.pm.list_name_plugin()}
    disabled = {name for name, info in runtime.pm.info.items() if not info.enabled}
    lines = []
    for layer in LAYERS:
        budget = budgets.get(layer)
        tokens = f"{used.get(layer, 0)}/{budget if budget is not None else 'no budget'} tokens"
        state = "disabled" if layer in disabled else "" if layer in present else "not installed"
        shown = ", ".join(f"{k} {v}" for k, v in counts.pop(layer, {}).items()) or state
        lines.append(f"{layer_label(layer)}  {tokens}" + (f" · {shown}" if shown else ""))
    others = list(counts) + [p for p in own if p not in counts and p not in LAYERS]
    for plugin in others:
        parts = [", ".join(f"{k} {v}" for k, v in counts.get(plugin, {}).items())]
        if plugin in own:
            layer = runtime.layer_of(plugin)
            where = f" (in L{LAYERS.index(layer) + 1} {layer}'s budget)" if layer in LAYERS else ""
            parts.insert(0, f"{own[plugin]} tokens{where}")
        lines.append(f"{plugin}  " + " · ".join(p for p in parts if p))
    return lines


async def _layers(runtime: Runtime, session: Session, **_: Any) -> str:
    outcomes = await runtime.call("layer_status", workspace=session.workspace, peer=session.peer, runtime=runtime)
    statuses = [dict(result, plugin=plugin) for plugin, result, _call in outcomes if isinstance(result, dict)]
    statuses += [  # a layer whose status failed says why (a broken backend), in the same one line as everywhere
        {"plugin": call.plugin, call.status: call.error} for plugin, _result, call in outcomes if call.status != "ok"
    ]
    assembly, from_last_turn = await session_assembly(runtime, session)
    source = "last turn of this thread" if from_last_turn else "assembled now"
    head = f"context {assembly.tokens}/{assembly.budget} tokens ({source}); per layer used/budget:"
    return "\n".join([head, *layer_lines(runtime, statuses, assembly)])


async def _approvals(runtime: Runtime, session: Any, **_: Any) -> str:
    items = await runtime.approvals(actor=session.peer, workspace=session.workspace)
    lines = [
        f"{i['id']}  [{i['kind']}] {i['title']}{'  FLAGGED: ' + ', '.join(i['flags']) if i.get('flags') else ''}"
        for i in items
    ]
    return "\n".join(lines) or "nothing is waiting for approval"


async def _approve(runtime: Runtime, args: str, session: Any, **_: Any) -> str:
    if not args:
        return "usage: /approve ITEM_ID"
    item = args.split()[0]
    outcome = await runtime.decide(item, "approve", actor=session.peer, workspace=session.workspace)
    return str(outcome.get("message", f"approved {item}"))


async def _reject(runtime: Runtime, args: str, session: Any, **_: Any) -> str:
    item, _space, reason = args.partition(" ")
    if not item:
        return "usage: /reject ITEM_ID [reason]"
    outcome = await runtime.decide(
        item, "reject", actor=session.peer, workspace=session.workspace, reason=reason.strip()
    )
    return str(outcome.get("message", f"rejected {item}"))


async def _forget(runtime: Runtime, args: str, session: Any, **_: Any) -> str:
    everything = args.strip() == "all"
    receipt = await runtime.forget(
        peer=session.peer, thread=None if everything else session.thread, workspace=session.workspace
    )
    scope = "everything about you" if everything else "this thread"
    parts = [
        f"{plugin}: " + ", ".join(f"{n} {what}" for what, n in counts.items()) for plugin, counts in receipt.items()
    ]
    return f"Forgot {scope}. " + ("; ".join(parts) or "Nothing was held.")


async def _recall(args: str, session: Session, runtime: Runtime, **_: Any) -> str:
    from thoth_core.recall import answer_lines

    if not args.strip():
        return "usage: /recall QUERY"
    found = await runtime.recall(query=args, peer=session.peer, workspace=session.workspace, limit=8)
    return "\n".join(answer_lines(found.as_dict()))


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
    register(Command("recall", "what every layer remembers of you matching a query, and why", _recall, usage="QUERY"))
