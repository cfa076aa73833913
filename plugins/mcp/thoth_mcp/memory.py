"""What the MCP tools do, through the runtime's public API only; each answer is text plus data.

`Memory` knows nothing of MCP: every method checks its input against the server's `Scope`,
asks the runtime (hooks, slash commands, tools) on behalf of one peer, and returns an
`Answer` whose `text` a person or model reads and whose `data` is the same, structured.
Bad input raises a `ThothError` whose message is one line naming the key or value.
"""

from __future__ import annotations

import copy
import getpass
import inspect
import json
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from thoth_core.budget import block_tokens
from thoth_core.errors import ThothError
from thoth_core.memory_tools import SCHEMAS, ToolSettings, run_tool
from thoth_core.recall import answer_lines, failure_line
from thoth_core.scope import NAME, Scope, valid_name
from thoth_core.types import Session, Turn

from .scope import DEFAULT_THREAD, thread_for

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

MAX_LIMIT: int = SCHEMAS["recall"]["input_schema"]["properties"]["limit"]["maximum"]  # the core recall tool's bound
MAX_TEXT = 20_000  # characters of a fact, note or message a tool accepts
DECISIONS = {"approve": "approved", "reject": "rejected"}  # decision -> its past tense


@dataclass(frozen=True)
class Answer:
    """A tool's result: readable text and the same as a JSON object."""

    text: str
    data: dict[str, Any]


def jsonable(value: Any) -> Any:
    """The value with everything JSON cannot hold turned into strings."""
    return json.loads(json.dumps(value, default=str))


def one_line(text: str) -> str:
    """Text folded onto one line (error messages)."""
    return " ".join(str(text).split())


def required_text(key: str, value: object) -> str:
    """A non-empty text argument, stripped, of bounded length."""
    if not isinstance(value, str) or not value.strip():
        raise ThothError(f"{key}: required, a non-empty text")
    if len(value) > MAX_TEXT:
        raise ThothError(f"{key}: {len(value)} characters, at most {MAX_TEXT}")
    return value.strip()


class Memory:
    """The server's view of Thoth's memory, scoped to the peer each call names."""

    def __init__(self, runtime: Runtime, scope: Scope) -> None:
        self.runtime = runtime
        self.scope = scope

    # --- who and where ------------------------------------------------------------------

    def where(self, peer: str | None, workspace: str | None) -> tuple[str, str]:
        """The (peer, workspace) a call may use."""
        return self.scope.peer_for(peer), self.scope.workspace_for(workspace)

    async def _session(self, peer: str, workspace: str, thread: str) -> tuple[Session, Turn]:
        session = await self.runtime.session(peer=peer, thread=thread, workspace=workspace)
        return session, Turn("", peer, thread, session.workspace)

    async def _command(self, name: str, args: str, turn: Turn, session: Session) -> str:
        """A slash command's reply; its error replies become a ThothError."""
        if name not in self.runtime.commands:
            raise ThothError(f"/{name} is not available: no enabled plugin offers it")
        reply = await self.runtime.run_command(name, args, replace_text(turn, f"/{name} {args}"), session)
        text = reply.text.strip()
        if text.startswith((f"/{name}:", f"/{name} failed", "usage:")):
            raise ThothError(one_line(text))
        return text

    # --- tools --------------------------------------------------------------------------

    async def recall(self, *, query: str, peer: str | None, workspace: str | None, limit: int) -> Answer:
        """What every layer remembers of the peer that matches the query, with why."""
        peer, workspace = self.where(peer, workspace)
        query = required_text("query", query)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise ThothError(f"limit: expected 1 to {MAX_LIMIT}, got {limit!r}")
        found = await self.runtime.recall(query=query, peer=peer, workspace=workspace, limit=limit)
        data = jsonable(found.as_dict())
        lines = answer_lines(data, ids=True)  # ids, for `correct`
        return Answer("\n".join(lines + [f"({failure_line(f)})" for f in data["failed"]]), data)

    async def remember(self, *, text: str, peer: str | None, workspace: str | None, thread: str | None) -> Answer:
        """Keep a hard fact or a note about the peer (the identity layer's /remember)."""
        peer, workspace = self.where(peer, workspace)
        text = required_text("text", text)
        session, turn = await self._session(peer, workspace, thread_for(thread))
        message = await self._command("remember", text, turn, session)
        return Answer(message, {"peer": peer, "workspace": workspace, "thread": session.thread, "message": message})

    async def correct(
        self, *, record: str, text: str, peer: str | None, workspace: str | None, thread: str | None
    ) -> Answer:
        """New text for one of the peer's records, as a turn's model proposes it (`run_tool`'s `correct`)."""
        peer, workspace = self.where(peer, workspace)
        session, turn = await self._session(peer, workspace, thread_for(thread))
        tool_input = {"id": record, "text": text}
        settings = ToolSettings.of(self.runtime)
        message = await run_tool(self.runtime, "correct", tool_input, turn=turn, session=session, settings=settings)
        if message.startswith("error:"):
            raise ThothError(message.removeprefix("error:").strip())
        data = {"peer": peer, "workspace": workspace, "thread": session.thread, "id": record, "message": message}
        return Answer(message, data)

    async def forget(self, *, peer: str | None, workspace: str | None, thread: str | None, confirm: bool) -> Answer:
        """Delete the peer's data (or one thread of it) in every layer; only with confirm=True."""
        peer, workspace = self.where(peer, workspace)
        thread = None if thread is None or thread == "" else valid_name("thread", thread)
        scope = f"peer {peer}" + (f", thread {thread}" if thread else "") + f" in workspace {workspace}"
        if confirm is not True:
            raise ThothError(f"confirm: must be true to forget {scope}; this deletes it in every layer, for good")
        receipt = jsonable(await self.runtime.forget(peer=peer, thread=thread, workspace=workspace))
        lines = [f"Forgot {scope}:"]
        lines += [
            f"  {plugin}: " + ", ".join(f"{n} {what}" for what, n in counts.items())
            for plugin, counts in sorted(receipt.items())
        ] or ["  nothing was held"]
        return Answer("\n".join(lines), {"peer": peer, "workspace": workspace, "thread": thread, "receipt": receipt})

    async def context(self, *, message: str, peer: str | None, workspace: str | None, thread: str | None) -> Answer:
        """The context a turn with this message would be given, per block, and what the budgets cut."""
        peer, workspace = self.where(peer, workspace)
        message = required_text("message", message)
        session, turn = await self._session(peer, workspace, thread_for(thread))
        probe = copy.copy(session)  # plugins may consume scratch entries (a chosen /skill) while assembling
        probe.scratch = dict(session.scratch)
        assembly = await self.runtime.context(replace_text(turn, message), probe)
        blocks = [
            {
                "tag": b.tag,
                "layer": b.layer,
                "plugin": b.plugin,
                "stable": b.stable,
                "priority": b.priority,
                "tokens": block_tokens(b),
                "text": b.text,
            }
            for b in assembly.blocks
        ]
        cuts = [asdict(c) for c in assembly.cuts]
        failed = [asdict(c) for c in assembly.calls if c.status != "ok"]
        head = f"Context for {peer} ({assembly.tokens}/{assembly.budget} tokens, {len(blocks)} blocks):"
        lines = [head]
        for b in blocks:
            origin = b["layer"] if b["plugin"] == b["layer"] else f"{b['layer']}, {b['plugin']}"
            stable = ", stable" if b["stable"] else ""
            lines.append(f"\n--- {b['tag']} ({origin}{stable}, {b['tokens']} tokens)\n{b['text']}")
        lines += [
            f"\ncut {c['plugin']}/{c['tag']}: {c['tokens']} -> {c['kept_tokens']} tokens ({c['reason']})" for c in cuts
        ]
        lines += [f"\n{c['plugin']}: {c['status']} ({c['error']})" for c in failed]
        data = {
            "peer": peer,
            "workspace": workspace,
            "thread": session.thread,
            "tokens": assembly.tokens,
            "budget": assembly.budget,
            "blocks": blocks,
            "cuts": cuts,
            "failed": failed,
        }
        return Answer("\n".join(lines), jsonable(data))

    async def approvals(self, *, peer: str | None, workspace: str | None) -> Answer:
        """The pending items the runtime's approvals policy lets this peer see (all of them for a decider)."""
        peer, workspace = self.where(peer, workspace)
        items = [
            {k: v for k, v in item.items() if k != "path"}  # a server-side path is no client's business
            for item in await self.runtime.approvals(actor=peer, workspace=workspace)
        ]
        lines = [
            f"{i.get('id')}  [{i.get('kind')}] {i.get('title')}"
            + (f"  FLAGGED: {', '.join(map(str, i['flags']))}" if i.get("flags") else "")
            for i in items
        ]
        text = "\n".join(lines) or "Nothing is waiting for approval."
        return Answer(text, {"peer": peer, "workspace": workspace, "items": jsonable(items)})

    async def decide(
        self, *, item_id: str, decision: str, peer: str | None, workspace: str | None, reason: str
    ) -> Answer:
        """Approve or reject a pending item as the peer, if the approvals policy lets them."""
        peer, workspace = self.where(peer, workspace)
        if decision not in DECISIONS:
            raise ThothError(f"decision: expected approve or reject, got {decision!r}")
        if not isinstance(item_id, str) or not item_id.strip():
            raise ThothError("item_id: required, an id from approvals_list")
        item_id = item_id.strip()
        outcome = await self.runtime.decide(item_id, decision, actor=peer, workspace=workspace, reason=reason or "")
        outcome = jsonable(outcome)
        message = str(outcome.get("message") or f"{DECISIONS[decision]} {item_id}")
        return Answer(message, {"item_id": item_id, "decision": decision, "peer": peer, "outcome": outcome})

    async def skills(self, *, peer: str | None, workspace: str | None) -> Answer:
        """The installed skills: slug and description."""
        peer, workspace = self.where(peer, workspace)
        session, turn = await self._session(peer, workspace, DEFAULT_THREAD)
        slugs = slug_enum(await self._load_skill_tool(turn, session))
        listing = await self._command("skills", "", turn, session) if "skills" in self.runtime.commands else ""
        described = dict(parse_skill_line(line) for line in listing.splitlines() if line.startswith("/skill "))
        skills = [{"slug": slug, "description": described.get(slug, "")} for slug in slugs]
        text = listing or "\n".join(f"{s['slug']} - {s['description']}" for s in skills) or "No skills installed."
        return Answer(text, {"skills": skills})

    async def skill(self, *, slug: str, peer: str | None, workspace: str | None) -> Answer:
        """One skill's whole SKILL.md, by slug."""
        peer, workspace = self.where(peer, workspace)
        if not isinstance(slug, str) or not slug.strip():
            raise ThothError("slug: required, a skill's slug from skills_list")
        session, turn = await self._session(peer, workspace, DEFAULT_THREAD)
        tool = await self._load_skill_tool(turn, session)
        slugs = slug_enum(tool)
        if tool is None or slug not in slugs:
            installed = ", ".join(slugs) or "none"
            raise ThothError(f"slug: unknown skill {slug!r}; installed: {installed}")
        text = tool["handler"]({"slug": slug})
        text = str(await text if inspect.isawaitable(text) else text)
        if text.startswith("error:"):
            raise ThothError(f"slug: {one_line(text[len('error:') :])}")
        return Answer(text, {"slug": slug, "text": text})

    async def _load_skill_tool(self, turn: Turn, session: Session) -> dict[str, Any] | None:
        tools = await self.runtime.tools(turn, session)
        return next((t for t in tools if t.get("name") == "load_skill" and callable(t.get("handler"))), None)

    # --- resources ----------------------------------------------------------------------

    async def persona(self) -> str:
        """The stable blocks of the procedural layer (persona stack, knowledge, skills index), rendered."""
        session, turn = await self._session(self.resource_peer(), self.scope.workspace_for(None), DEFAULT_THREAD)
        probe = copy.copy(session)
        probe.scratch = dict(session.scratch)
        assembly = await self.runtime.context(turn, probe)
        blocks = [b for b in assembly.blocks if b.stable and b.layer == "procedural"]
        return "\n\n".join(b.render() for b in blocks) or "(no persona: the procedural layer gave no stable blocks)"

    async def skills_index(self) -> str:
        """The skills as JSON: slug and description of each."""
        answer = await self.skills(peer=self.resource_peer(), workspace=None)
        return json.dumps(answer.data, indent=2)

    def resource_peer(self) -> str:
        """The peer resources are read as: the pinned one, else this user (they show nothing peer-specific)."""
        if self.scope.peer:
            return self.scope.peer
        user = getpass.getuser()
        return user if NAME.fullmatch(user) else DEFAULT_THREAD


def replace_text(turn: Turn, text: str) -> Turn:
    """The same turn with another text (and its own id)."""
    return Turn(text, turn.peer, turn.thread, turn.workspace)


def slug_enum(tool: dict[str, Any] | None) -> list[str]:
    """The slugs the `load_skill` tool accepts."""
    if tool is None:
        return []
    slug = ((tool.get("input_schema") or {}).get("properties") or {}).get("slug") or {}
    return [str(s) for s in slug.get("enum") or []]


def parse_skill_line(line: str) -> tuple[str, str]:
    """`/skill SLUG - DESCRIPTION` as (slug, description)."""
    slug, _, description = line.removeprefix("/skill ").partition(" - ")
    return slug.strip(), description.strip()


__all__ = ["Answer", "Memory", "jsonable", "one_line"]
