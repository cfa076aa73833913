"""L4 procedural memory: persona, skills, knowledge and reflexion in context; skill drafts through approval.

At session start the persona stack, knowledge notes and the skills index are read once and kept
in `session.scratch` as stable blocks (the cacheable front of the prompt); reflexion records are
read too, but offered only for a turn that hits an error (`turn.error`, or the session's
previous turn failed). `/skill SLUG [message]` loads one skill's SKILL.md for one turn.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import Command, ContextBlock, DoctorLine, Session, ThothError, Turn, hookimpl
from thoth_core.redact import redactor_of

from . import drafts, frontmatter
from .cli import skills as skills_cli
from .defaults import copy_defaults
from .knowledge import Reflexion, load_notes, load_reflexion, matching, reflexion_block
from .persona import PersonaError, load_persona
from .records import memory_record as memory_record  # hookimpls: registered with this module
from .records import memory_records as memory_records
from .records import recall as recall
from .settings import DEFAULTS, NAME, Settings
from .shared import sync_skills
from .skills import discover, load_skill, skill_block
from .tools import load_skill_tool, run_load_skill
from .validate import SkillError

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

LAYER = "procedural"
CONFIG_DEFAULTS = {f"plugins.{NAME}": DEFAULTS}
CONTEXT_KEY = "procedural.context"
SKILL_KEY = "procedural.skill"
TOOL_KEY = "procedural.tool"


@dataclass
class SessionContext:
    """What a session read at its start: the stable blocks, the reflexion records, and problems found."""

    blocks: list[ContextBlock]
    reflexion: list[Reflexion]
    errors: list[str] = field(default_factory=list)


def load_context(runtime: Runtime) -> SessionContext:
    """Read the persona, knowledge notes, skills index and reflexion records (skills approved on other hosts
    written here first, with a shared store)."""
    settings = Settings.of(runtime)
    errors: list[str] = []
    sync_skills(runtime)
    frontmatter.recall(runtime.home / NAME)

    def persona_error(exc: PersonaError) -> None:
        logger.error("%s", exc)
        errors.append(str(exc))

    blocks = load_persona(settings.persona, on_error=persona_error)
    catalog = discover(settings.skills, settings.limits)
    index = catalog.index_block()
    blocks += ([index] if index else []) + load_notes(settings.knowledge)
    context = SessionContext(blocks, load_reflexion(settings.reflexion), errors + catalog.errors)
    frontmatter.remember(runtime.home / NAME)
    return context


def session_context(session: Session) -> SessionContext:
    """The context a session loaded at its start (loaded now if it has not been)."""
    context = session.scratch.get(CONTEXT_KEY)
    if not isinstance(context, SessionContext):
        assert session.runtime is not None  # the runtime calls session hooks with its own sessions
        context = session.scratch[CONTEXT_KEY] = load_context(session.runtime)
    return context


def failure_of(turn: Turn, session: Session) -> str | None:
    """The error text (redacted) this turn carries, or that the session's previous turn ended with.

    Rows that are not turns (tool calls, markers a resumed session's transcript may hold) are
    skipped, so a session resumed by a new process still sees its last turn's error.
    """
    redact = redactor_of(session.runtime).redact
    if turn.error:
        return redact(turn.error)
    for row in reversed(session.transcript):
        if row.get("type") == "error":
            return redact(f"{row.get('error', '')} (while answering: {row.get('user', '')})")
        if row.get("type") == "turn":
            return None
    return None


@hookimpl
def configure(runtime: Runtime) -> None:
    """Check `[plugins.procedural]` at start-up, so a bad value stops every command."""
    Settings.of(runtime)


@hookimpl
def session_start(session: Session) -> None:
    assert session.runtime is not None
    session.scratch[CONTEXT_KEY] = load_context(session.runtime)


@hookimpl
def pre_spawn_context(turn: Turn, session: Session) -> list[ContextBlock]:
    context = session_context(session)
    blocks = list(context.blocks)
    slug = session.scratch.pop(SKILL_KEY, None)
    if slug:
        assert session.runtime is not None
        settings = Settings.of(session.runtime)
        try:
            blocks.append(skill_block(load_skill(settings.skills, slug, settings.limits)))
        except SkillError as exc:
            logger.error("/skill %s: %s", slug, exc)
    failure = failure_of(turn, session)
    if failure:
        block = reflexion_block(matching(context.reflexion, f"{failure} {turn.text}"), failure)
        if block is not None:
            blocks.append(block)
    return blocks


@hookimpl
def turn_tools(session: Session) -> list[dict[str, Any]] | None:
    """`load_skill`, so a tool-calling model can open a skill of the index by itself."""
    runtime = session.runtime
    assert runtime is not None
    tool = session.scratch.get(TOOL_KEY) or session.scratch.setdefault(TOOL_KEY, load_skill_tool(runtime))
    if not tool["input_schema"]["properties"]["slug"]["enum"]:
        return None
    return [dict(tool, handler=lambda tool_input: run_load_skill(runtime, tool_input))]


async def _skills_command(runtime: Runtime, session: Session, **_: Any) -> str:
    settings = Settings.of(runtime)
    catalog = discover(settings.skills, settings.limits)
    lines = [f"/skill {s.slug} - {s.description}" for s in catalog.skills] or ["no skills installed"]
    lines += [f"invalid: {e}" for e in catalog.errors]
    visible = await runtime.approvals(actor=session.peer, workspace=session.workspace)
    pending = [str(item["id"]) for item in visible if item.get("kind") == "skill"]
    if pending:
        lines.append("pending approval: " + ", ".join(pending) + " (/approvals, /approve ID, /reject ID REASON)")
    return "\n".join(lines)


async def _skill_command(args: str, session: Session, runtime: Runtime, **_: Any) -> str:
    slug, _space, message = args.strip().partition(" ")
    if not slug:
        return "usage: /skill SLUG [message]; /skills lists them"
    settings = Settings.of(runtime)
    skill = load_skill(settings.skills, slug, settings.limits)
    session.scratch[SKILL_KEY] = skill.slug
    if not message.strip():
        return f"Skill {skill.slug} loaded for your next message."
    result = await runtime.turn(message.strip(), peer=session.peer, thread=session.thread, workspace=session.workspace)
    return str(result.reply.text)


@hookimpl
def init_home(root: Path) -> list[str]:
    return copy_defaults(root)


@hookimpl
def register_commands(register: Any) -> None:
    register(Command("skills", "list the skills (and drafts waiting for approval)", _skills_command))
    register(
        Command("skill", "use a skill for the next message (or for this one)", _skill_command, usage="SLUG [message]")
    )


@hookimpl
def register_cli_commands(cli: Any) -> None:
    cli.add_command(skills_cli)


@hookimpl
def approvals(runtime: Runtime) -> list[dict[str, Any]]:
    return [draft.as_item() for draft in drafts.list_drafts(runtime)]


@hookimpl
def decide(
    item_id: str, decision: str, actor: str, reason: str, text: str | None, runtime: Runtime
) -> dict[str, Any] | None:
    if not item_id.startswith("skill:"):
        return None
    key = item_id.removeprefix("skill:")
    if decision == "approve":
        done = drafts.approve_draft(runtime, key, actor=actor)
        return {"item_id": item_id, "message": done.message, "path": str(done.path), "commit": done.commit}
    if decision == "reject":
        archive = drafts.reject(runtime, key, actor=actor, reason=reason)
        return {"item_id": item_id, "message": f"rejected skill {key}: archived in {archive}", "path": str(archive)}
    if decision == "edit":
        if not text or not text.strip():
            raise ThothError(f"editing {item_id} needs the new instructions as text")
        path = drafts.edit(runtime, key, actor=actor, text=text)
        return {"item_id": item_id, "message": f"edited draft {key}; it is still pending", "path": str(path)}
    raise ThothError(f"unknown decision {decision!r} for {item_id}; expected approve, reject or edit")


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
async def reflection_result(result: dict[str, Any], session: Session) -> None:
    skill = result.get("skill")
    if not skill:
        return
    runtime = session.runtime
    assert runtime is not None
    flags = list((result.get("flags") or {}).get("skill") or [])
    source = {
        "session_id": result.get("session_id"),
        "run_id": result.get("run_id"),
        "workspace": session.workspace,
        "peer": session.peer,
        "thread": session.thread,
    }
    path = await asyncio.to_thread(
        drafts.write_draft,
        runtime,
        name=skill.get("name"),
        description=skill.get("description", ""),
        body=skill.get("body", ""),
        source=source,
        flags=flags,
    )
    warning = f" FLAGGED ({', '.join(flags)}): read it closely." if flags else ""
    summary = " ".join(str(skill.get("description", "")).split()).rstrip(".")
    text = (
        f"Reflection drafted a new skill {path.name}: {summary}.{warning} "
        f"Approve with /approve skill:{path.name} or reject with /reject skill:{path.name} REASON."
    )
    runtime.notify(
        "approval_requested",
        item_id=f"skill:{path.name}",
        text=text,
        workspace=session.workspace,
        peer=session.peer,
        thread=session.thread,
        flags=flags,
    )


@hookimpl
def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime) -> dict[str, int] | None:
    receipt = drafts.forget(runtime, peer=peer, workspace=workspace, thread=thread)
    frontmatter.forget(runtime.home / NAME)
    return {k: v for k, v in receipt.items() if v} or None


@hookimpl
def doctor_checks(runtime: Runtime) -> list[DoctorLine] | None:
    """With a shared store: warnings for what this host keeps apart from it (old draft folders, differing skills)."""
    shared = drafts.shared_of(runtime)  # this host's older draft folders taken into the store first
    if shared is None:
        return None
    sync_skills(runtime)
    settings = Settings.of(runtime)
    lines: list[DoctorLine] = [(None, why) for _, why in sorted(shared.conflicts.items())]
    lines += [
        (None, f"procedural: skill draft {settings.drafts / key} is kept on this host only (its key waits in the"
         " shared store with other files); approve or reject that one, then delete this folder")
        for key in shared.local_drafts(settings.drafts)
    ]  # fmt: skip
    return lines or [(True, f"procedural: skill drafts and approved skills are shared ({shared.where()})")]


@hookimpl
def layer_status(runtime: Runtime) -> dict[str, Any]:
    settings = Settings.of(runtime)
    catalog = discover(settings.skills, settings.limits)
    notes = len(list(settings.knowledge.glob("*.md"))) if settings.knowledge.is_dir() else 0
    records = len(list(settings.reflexion.glob("*.md"))) if settings.reflexion.is_dir() else 0
    return {
        "layer": LAYER,
        "skills": len(catalog.skills),
        "drafts": len(drafts.list_drafts(runtime)),
        "knowledge": notes,
        "reflexion": records,
    }
