"""What each Claude Code hook does with a loaded runtime: context out, turns in, the session ended.

Claude Code's session is a Thoth thread (`session_id`), its user the peer of `[plugins.claude-code]
peer`, in the config's workspace. SessionStart gives the stable context (persona, skills index,
knowledge, MEMORY.md) and the user model; UserPromptSubmit the blocks of this prompt (related
episodes on a thread's first prompt, the user model); Stop records the finished turns of the
transcript not recorded yet; SessionEnd records what is left and ends the session (reflection).
Only the runtime's public API is used: frontends never import layer plugins.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from thoth_core import ContextBlock, ThothError
from thoth_core.types import Reply, Turn

from .ledger import Ledger
from .settings import NAME, Settings
from .transcript import read_turns

if TYPE_CHECKING:
    from thoth_core import Runtime

MARGIN = 0.05  # seconds kept for assembling and printing once the plugins' deadlines have passed
CUT_NOTICE = "\n[cut to fit Claude Code's hook output limit]"


class PayloadError(ThothError):
    """Claude Code's hook input is not what the hooks reference describes; shown as one stderr line."""


@dataclass(frozen=True)
class Payload:
    """The hook input fields Thoth uses (common fields plus the event's own)."""

    event: str
    session_id: str
    transcript_path: str = ""
    cwd: str = ""
    prompt: str = ""
    source: str = ""
    reason: str = ""
    stop_hook_active: bool = False

    @classmethod
    def parse(cls, event: str, text: str) -> Payload:
        """Check and read stdin's JSON; raises PayloadError naming what is wrong."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PayloadError(f"stdin: not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from exc
        if not isinstance(data, dict):
            raise PayloadError(f"stdin: expected a JSON object, got {type(data).__name__}")
        session_id = data.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            raise PayloadError(f"stdin: session_id: expected Claude Code's session id, got {session_id!r}")
        fields = {k: data[k] for k in ("transcript_path", "cwd", "prompt", "source", "reason") if k in data}
        for key, value in fields.items():
            if not isinstance(value, str):
                raise PayloadError(f"stdin: {key}: expected a string, got {value!r}")
        return cls(event=event, session_id=session_id, stop_hook_active=data.get("stop_hook_active") is True, **fields)


def for_hooks(runtime: Runtime, settings: Settings) -> Runtime:
    """Fit the runtime to a hook process: a session stays open `[plugins.claude-code] idle_minutes` between hooks."""
    data = copy.deepcopy(runtime.config.data)
    data.setdefault("thoth", {})["idle_minutes"] = max(
        float(runtime.config.get("thoth.idle_minutes")), settings.idle_minutes
    )
    runtime.config = replace(runtime.config, data=data)
    return runtime


def fit_chars(blocks: list[ContextBlock], limit: int) -> str:
    """The blocks rendered in order, the lowest-priority ones dropped or cut to stay within limit characters."""
    kept: dict[int, str] = {}
    room = limit
    for index in sorted(range(len(blocks)), key=lambda i: -blocks[i].priority):
        text = blocks[index].render()
        cost = len(text) + 2
        if cost <= room:
            kept[index], room = text, room - cost
        elif room > len(CUT_NOTICE) + 200:
            kept[index] = text[: room - len(CUT_NOTICE) - 2] + CUT_NOTICE
            room = 0
    return "\n\n".join(kept[i] for i in sorted(kept))


def hook_output(event: str, context: str) -> str:
    """The JSON Claude Code adds to the model's context (hookSpecificOutput.additionalContext); '' for none."""
    if not context:
        return ""
    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}})


async def session_start_context(
    runtime: Runtime, payload: Payload, settings: Settings, *, until: float | None = None
) -> str:
    """The stable context and the user model, as additionalContext JSON; no plugin runs past `until` (monotonic)."""
    session = await runtime.session(peer=settings.peer, thread=payload.session_id)
    turn = Turn("", settings.peer, payload.session_id, session.workspace)
    assembly = await runtime.context(turn, session, until=None if until is None else until - MARGIN)
    blocks = [b for b in assembly.blocks if b.stable or b.layer == "identity"]
    return hook_output("SessionStart", fit_chars(blocks, settings.max_chars))


async def prompt_context(runtime: Runtime, payload: Payload, settings: Settings, *, until: float | None = None) -> str:
    """This prompt's blocks (related episodes, the user model; not the stable ones), as additionalContext JSON."""
    if not payload.prompt.strip():
        return ""
    session = await runtime.session(peer=settings.peer, thread=payload.session_id)
    turn = Turn(payload.prompt, settings.peer, payload.session_id, session.workspace)
    assembly = await runtime.context(turn, session, until=None if until is None else until - MARGIN)
    blocks = [b for b in assembly.blocks if not b.stable]
    return hook_output("UserPromptSubmit", fit_chars(blocks, settings.max_chars))


def ledger_of(runtime: Runtime) -> Ledger:
    """This runtime's ledger of recorded turns (closed by `runtime.aclose()`)."""
    return runtime.plugin_state(f"{NAME}.ledger", lambda: Ledger(Path(runtime.home) / NAME / "ledger.db"))  # type: ignore[no-any-return]


async def record_finished_turns(runtime: Runtime, payload: Payload, settings: Settings) -> int:
    """Record each finished turn of the transcript once; returns how many this call recorded."""
    if not payload.transcript_path:
        raise PayloadError("stdin: transcript_path: missing; Claude Code sends it with every hook")
    path = Path(payload.transcript_path).expanduser()
    try:
        turns = read_turns(path)
    except FileNotFoundError:
        return 0  # nothing said yet: Claude Code writes the file with the first message
    except OSError as exc:
        raise PayloadError(f"{path}: cannot read the transcript: {exc}") from exc
    ledger = ledger_of(runtime)
    done = ledger.recorded([t.turn_id for t in turns])
    todo = [t for t in turns if t.turn_id not in done]
    if not todo:
        return 0
    session = await runtime.session(peer=settings.peer, thread=payload.session_id)
    recorded = 0
    for said in todo:
        if not ledger.claim(said.turn_id, payload.session_id):
            continue  # another hook (a second Stop, SessionEnd) is recording it
        turn = Turn(said.prompt, settings.peer, payload.session_id, session.workspace, id=said.turn_id)
        if said.at is not None:
            turn.created_at = said.at
        try:
            await runtime.record(turn, Reply(said.reply, model=said.model or "claude-code"), session)
        except BaseException:
            ledger.release(said.turn_id)
            raise
        recorded += 1
    return recorded


async def end_session(runtime: Runtime, payload: Payload, settings: Settings) -> int:
    """Record what Stop left, then end the session so `session_end` (reflection) runs; returns turns recorded."""
    recorded = await record_finished_turns(runtime, payload, settings) if payload.transcript_path else 0
    session = await runtime.session(peer=settings.peer, thread=payload.session_id)
    await runtime.end_session(session, f"claude-code:{payload.reason or 'other'}")
    return recorded


__all__ = [
    "Payload",
    "PayloadError",
    "end_session",
    "fit_chars",
    "for_hooks",
    "hook_output",
    "prompt_context",
    "record_finished_turns",
    "session_start_context",
]
