"""The memory tools a model calls: `recall`, `remember` and `correct`, one schema and one behaviour for every caller.

A turn offers them to its model (the `memory_tools` plugin); the MCP server and `thoth serve` offer
the same schemas to other agents. Every call is about the session's peer, never anyone else:

- `recall`: `Runtime.recall` over every layer, each hit with its id, layer and why it matched.
- `remember`: a fact or note about the peer. The write policy judges it: a plain statement of fact
  about the peer (a tier of `auto_apply`, default `self-fact`) is remembered as `/remember` does;
  anything else (an instruction to the agent, another person, another language, a command or URL)
  waits in the approval queue (`Runtime.hold_write`), and the model is told so.
- `correct`: new text for one of the peer's records (an id `recall` gave); held for a person
  unless its tier is one of `correct_auto_apply` (default none: every correction waits).

A text with a secret, or that no store can keep, is refused with one line; nothing is kept.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .budget import count_tokens, truncate
from .errors import ThothError
from .inputs import text_problem
from .recall import hit_lines
from .types import Session, ToolDefinition, Turn

if TYPE_CHECKING:
    from .runtime import Runtime

NAMES = ("recall", "remember", "correct")
SETTINGS = "memory_tools"  # the plugin table of the settings, `[plugins.memory_tools]`

SCHEMAS: dict[str, ToolDefinition] = {
    "recall": {
        "name": "recall",
        "description": (
            "Search everything remembered about the person you are talking with (facts, notes, past "
            "conversations, knowledge, lessons) by meaning. Use it when the answer may be in memory but "
            "is not in your context. Each hit has an id, its layer and why it matched."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in plain words."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 20, "description": "At most this many hits."},
            },
            "required": ["query"],
        },
    },
    "remember": {
        "name": "remember",
        "description": (
            "Keep one fact or note about the person you are talking with, as a statement about them "
            '("The user lives in Oslo", "Prefers short answers"). Plain facts about them '
            "are kept at once; anything else waits for a person's approval, and the answer says so."
        ),
        "input_schema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "The fact or note, one sentence."}},
            "required": ["text"],
        },
    },
    "correct": {
        "name": "correct",
        "description": (
            "Propose new text for one remembered record of the person you are talking with (an id from "
            "recall, like f12 or o34) when you see it is wrong. A person approves it before it applies, "
            "and the answer says so."
        ),
        "input_schema": {
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The record's id, as recall gave it."},
                "text": {"type": "string", "description": "The record as it should read."},
            },
            "required": ["id", "text"],
        },
    },
}


@dataclass(frozen=True)
class ToolSettings:
    """What the tools may do (`[plugins.memory_tools]`): the tiers kept without a person, how much they read, write."""

    auto_apply: tuple[str, ...] = ("self-fact",)
    correct_auto_apply: tuple[str, ...] = ()
    recall_limit: int = 6
    result_tokens: int = 800
    max_chars: int = 2000

    @classmethod
    def of(cls, runtime: Runtime) -> ToolSettings:
        """The home's settings, `[plugins.memory_tools]` over the defaults."""
        table, default = runtime.config.section(f"plugins.{SETTINGS}"), cls()
        return cls(
            auto_apply=tuple(table.get("auto_apply", default.auto_apply)),
            correct_auto_apply=tuple(table.get("correct_auto_apply", default.correct_auto_apply)),
            recall_limit=int(table.get("recall_limit", default.recall_limit)),
            result_tokens=int(table.get("result_tokens", default.result_tokens)),
            max_chars=int(table.get("max_chars", default.max_chars)),
        )


async def run_tool(
    runtime: Runtime, name: str, tool_input: Any, *, turn: Turn, session: Session, settings: ToolSettings
) -> str:
    """Run one memory tool for the session's peer; its answer to the model, in plain text."""
    if not isinstance(tool_input, dict):
        return f"error: {name} takes a JSON object, got {type(tool_input).__name__}"
    try:
        if name == "recall":
            return await recall(runtime, session, tool_input, settings)
        if name == "remember":
            return await remember(runtime, turn, session, _text(runtime, tool_input, "text", settings), settings)
        if name == "correct":
            record = str(tool_input.get("id", "")).strip()
            if not record:
                return "error: correct needs the record's id (recall gives it, like f12)"
            text = _text(runtime, tool_input, "text", settings)
            return await correct(runtime, session, record, text, settings)
    except ThothError as exc:
        return f"error: {exc}"
    return f"error: no memory tool named {name!r}; one of {', '.join(NAMES)}"


async def recall(runtime: Runtime, session: Session, tool_input: dict[str, Any], settings: ToolSettings) -> str:
    """The peer's memories matching the query, best first, within `result_tokens`."""
    query = str(tool_input.get("query", "")).strip()
    if not query:
        return "error: recall needs a query"
    limit = tool_input.get("limit", settings.recall_limit)
    limit = max(1, min(20, limit)) if isinstance(limit, int) and not isinstance(limit, bool) else settings.recall_limit
    found = (await runtime.recall(query=query, peer=session.peer, workspace=session.workspace, limit=limit)).as_dict()
    lines = hit_lines(found["hits"], ids=True) or [f"Nothing remembered matches {query!r}."]
    lines += [f"({f['plugin']} could not answer: {f['status']})" for f in found["failed"]]
    text = "\n".join(lines)
    if count_tokens(text) > settings.result_tokens:
        text = truncate(text, settings.result_tokens) + "\n[more hits were cut]"
    return text


async def remember(runtime: Runtime, turn: Turn, session: Session, text: str, settings: ToolSettings) -> str:
    """Remember a fact or note about the peer if the policy applies it by itself, else hold it for a person."""
    from .write_policy import judge

    verdict = judge(text, peer=session.peer, auto_apply=settings.auto_apply, known_peers=known_peers(runtime, session))
    if not verdict.applied:
        return await _held(runtime, "remember", text, session, verdict.flags, verdict.tier, None)
    if "remember" not in runtime.commands:
        return "not kept: no layer here remembers facts about people (the identity layer is not installed)"
    reply = await runtime.run_command("remember", text, turn, session)
    return f"error: {reply.error}" if reply.error else reply.text


async def correct(runtime: Runtime, session: Session, record: str, text: str, settings: ToolSettings) -> str:
    """Change one of the peer's records if the policy applies it by itself, else hold the change for a person."""
    from .write_policy import judge

    found = await runtime.get_record(record_id=record, peer=session.peer, workspace=session.workspace)
    if found is None:
        return f"error: {session.peer} has no record {record!r}; recall gives the ids"
    if found.get("editable") is False:
        return f"error: {record} ({found['layer']} {found['kind']}) cannot be changed"
    known = known_peers(runtime, session)
    verdict = judge(text, peer=session.peer, auto_apply=settings.correct_auto_apply, known_peers=known)
    if not verdict.applied:
        return await _held(runtime, "correct", text, session, verdict.flags, verdict.tier, record)
    now = await runtime.edit_record(record_id=record, text=text, peer=session.peer, workspace=session.workspace)
    return f"corrected {record}" + (f" (now {now['id']}): {now['text']}" if now else "")


async def _held(
    runtime: Runtime, kind: str, text: str, session: Session, flags: tuple[str, ...], tier: str, record: str | None
) -> str:
    """Queue the write for a person and say so; or say why it was not kept when nothing here queues."""
    why = ", ".join(flags) or tier
    item = await runtime.hold_write(kind=kind, text=text, session=session, flags=list(flags), tier=tier, record=record)
    if item is None:
        return f"not kept: it needs a person's approval ({why}) and no approval queue is installed here (reflection)"
    return (
        f"held for approval as {item} ({why}): it is not in memory until a person approves it "
        f"(/approve {item}); tell the user if it matters"
    )


def known_peers(runtime: Runtime, session: Session) -> set[str]:
    """The other people of the session's workspace this process has talked with: text about them is theirs."""
    return {peer for workspace, peer, *_ in runtime.sessions if workspace == session.workspace} - {session.peer}


def secret_problem(runtime: Runtime, text: str) -> str | None:
    """Why a text may not be kept: it holds a secret, also one spread over lines or spaces; None if it holds none."""
    found = runtime.redactor.find_secrets(text) or runtime.redactor.find_secrets("".join(text.split()))
    if not found:
        return None
    return f"not kept: that holds a secret ({', '.join(found)}); secrets are never kept in memory"


def write_problem(runtime: Runtime, text: str, settings: ToolSettings) -> str | None:
    """Why a write may keep nothing of a text (not storable, too long, a secret); None when it may."""
    problem = text_problem(text)
    if problem:
        return f"the text {problem}; nothing was kept"
    if len(text) > settings.max_chars:
        return f"{len(text):,} characters, more than the {settings.max_chars:,} one write may keep"
    return secret_problem(runtime, text)


def _text(runtime: Runtime, tool_input: dict[str, Any], key: str, settings: ToolSettings) -> str:
    """The text a write tool was given, checked: present, storable, not too long, no secret."""
    text = tool_input.get(key)
    if not isinstance(text, str) or not text.strip():
        raise ThothError(f"{key}: required, a non-empty text")
    problem = write_problem(runtime, text, settings)
    if problem:
        raise ThothError(problem)
    return text.strip()
