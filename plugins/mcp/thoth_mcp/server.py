"""The MCP server: Thoth's memory as tools and resources, on the `mcp` SDK's `MCPServer`.

Each tool is a thin function over `Memory`; `answered` turns its `Answer` into a
`CallToolResult` with readable text and the same data as structured content, and any error
into a tool error of one line (the server keeps running). Tool descriptions are what the
client's model reads, so they say what each tool does and which arguments matter.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from thoth_core.errors import ThothError
from thoth_core.memory_tools import SCHEMAS

from .memory import MAX_LIMIT, Answer, Memory, one_line

if TYPE_CHECKING:
    from thoth_core import Runtime
    from thoth_core.scope import Scope

logger = logging.getLogger(__name__)

INSTRUCTIONS = """Thoth is a chat agent's long-term memory in five layers (working, identity, episodic,
procedural, reflection). Every tool works for one peer (the person the memory is about): pass
`peer` unless the server is pinned to one. Use `recall` before answering questions about the
person or past work, `remember` for durable facts they state, `correct` to propose new text for a
record recall showed wrong (by its id; a person approves it), `context` to see what a turn would be
given, `skills_list` and `skill_load` for the agent's procedures. `forget` deletes data for good and
needs confirm=true. Resources: thoth://persona (the persona stack), thoth://skills (the skills)."""

Peer = Annotated[
    str | None,
    Field(description="Whose memory: the peer's id (e.g. a user name). May be left out when the server is pinned."),
]
Workspace = Annotated[str | None, Field(description="Workspace; default: the server's (from thoth.toml).")]
Thread = Annotated[str | None, Field(description="Thread the call belongs to; default `mcp`.")]
LIMIT_BOUNDS = {"minimum": 1, "maximum": MAX_LIMIT}  # shown, as the core's; `Memory.recall` checks them in one line
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DELETES = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
DESCRIPTIONS = {
    "recall": (
        "Search the peer's memory (facts, notes, past conversations) for a query; each hit says its "
        "id, layer, score and why it matched."
    ),
    "remember": (
        "Remember a durable fact or note about the peer (a hard fact when it states one, else a "
        "note); secrets are refused."
    ),
    "correct": (
        "Propose new text for one of the peer's remembered records (an id from recall, like f12 or o34) "
        "when it is wrong. It waits for a person's approval (approvals_list) unless the home's write "
        "policy applies it at once; the answer says which."
    ),
    "forget": (
        "Delete everything every layer holds about the peer (or one thread of theirs), for good, "
        "and return the receipt. Refused unless confirm is true: only call it when the person "
        "explicitly asked to be forgotten."
    ),
    "context": (
        "Show the context a chat turn with this message would be given, block by block (tag, layer, "
        "tokens, text), and what the budgets cut. Calls no model."
    ),
}


async def answered(tool: str, work: Awaitable[Answer]) -> CallToolResult:
    """The tool's answer as text plus structured content; an error as a one-line tool error."""
    try:
        answer = await work
    except ThothError as exc:
        return failure(f"{tool}: {one_line(str(exc))}")
    except Exception as exc:  # noqa: BLE001 - a failing plugin must not take the server down
        logger.exception("thoth mcp: tool %s failed", tool)
        return failure(f"{tool} failed: {type(exc).__name__}: {one_line(str(exc))}")
    return CallToolResult(content=[TextContent(type="text", text=answer.text)], structured_content=answer.data)


async def read(uri: str, work: Awaitable[str]) -> str:
    """A resource's text; an error as a one-line resource error."""
    try:
        return await work
    except Exception as exc:  # noqa: BLE001 - a failing plugin must not take the server down
        logger.exception("thoth mcp: reading %s failed", uri)
        raise ResourceError(f"{uri}: {type(exc).__name__}: {one_line(str(exc))}") from exc


def failure(message: str) -> CallToolResult:
    """A tool error the client's model can read."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)


def build_server(runtime: Runtime, scope: Scope) -> MCPServer:
    """An MCP server over this runtime's memory, answering only about the peers the scope allows."""
    memory = Memory(runtime, scope)
    pinned = f" This server is pinned to peer {scope.peer!r}." if scope.peer else ""
    server: MCPServer = MCPServer("thoth", instructions=INSTRUCTIONS + pinned, version=_version(), log_level="WARNING")

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["recall"])
    async def recall(
        query: Annotated[str, Field(description="What to look for, in words.")],
        peer: Peer = None,
        workspace: Workspace = None,
        limit: Annotated[int, Field(description="At most this many hits.", json_schema_extra=LIMIT_BOUNDS)] = 8,
    ) -> CallToolResult:
        """Search the peer's memory."""
        return await answered("recall", memory.recall(query=query, peer=peer, workspace=workspace, limit=limit))

    @server.tool(annotations=WRITES, description=DESCRIPTIONS["remember"])
    async def remember(
        text: Annotated[str, Field(description="The fact or note, e.g. `my name is Ada` or `prefers short answers`.")],
        peer: Peer = None,
        workspace: Workspace = None,
        thread: Thread = None,
    ) -> CallToolResult:
        """Remember a fact or note about the peer."""
        return await answered("remember", memory.remember(text=text, peer=peer, workspace=workspace, thread=thread))

    @server.tool(annotations=WRITES, description=DESCRIPTIONS["correct"])
    async def correct(
        id: Annotated[str, Field(description=core_description("correct", "id"))],  # noqa: A002 - the core schema's
        text: Annotated[str, Field(description=core_description("correct", "text"))],
        peer: Peer = None,
        workspace: Workspace = None,
        thread: Thread = None,
    ) -> CallToolResult:
        """Propose new text for one of the peer's records."""
        work = memory.correct(record=id, text=text, peer=peer, workspace=workspace, thread=thread)
        return await answered("correct", work)

    @server.tool(annotations=DELETES, description=DESCRIPTIONS["forget"])
    async def forget(
        confirm: Annotated[bool, Field(description="Must be true: the deletion cannot be undone.")] = False,
        peer: Peer = None,
        workspace: Workspace = None,
        thread: Annotated[str | None, Field(description="Only this thread; default: all of the peer's data.")] = None,
    ) -> CallToolResult:
        """Delete the peer's data, with confirm=true."""
        return await answered("forget", memory.forget(peer=peer, workspace=workspace, thread=thread, confirm=confirm))

    @server.tool(annotations=READ_ONLY, description=DESCRIPTIONS["context"])
    async def context(
        message: Annotated[str, Field(description="The message a turn would start with.")],
        peer: Peer = None,
        workspace: Workspace = None,
        thread: Thread = None,
    ) -> CallToolResult:
        """The context a turn would be given."""
        return await answered("context", memory.context(message=message, peer=peer, workspace=workspace, thread=thread))

    @server.tool(annotations=READ_ONLY)
    async def approvals_list(peer: Peer = None, workspace: Workspace = None) -> CallToolResult:
        """List the items waiting for approval that the peer may see: all for a decider, else those about the peer."""
        return await answered("approvals_list", memory.approvals(peer=peer, workspace=workspace))

    @server.tool(annotations=WRITES)
    async def approve(
        item_id: Annotated[str, Field(description="The item's id from approvals_list, e.g. `skill:weekly-report`.")],
        peer: Peer = None,
        workspace: Workspace = None,
        reason: Annotated[str, Field(description="Why (optional).")] = "",
    ) -> CallToolResult:
        """Approve a pending item as the peer (a decider: [thoth] founders, else the home's owner)."""
        return await answered(
            "approve",
            memory.decide(item_id=item_id, decision="approve", peer=peer, workspace=workspace, reason=reason),
        )

    @server.tool(annotations=WRITES)
    async def reject(
        item_id: Annotated[str, Field(description="The item's id from approvals_list.")],
        peer: Peer = None,
        workspace: Workspace = None,
        reason: Annotated[str, Field(description="Why it is rejected.")] = "",
    ) -> CallToolResult:
        """Reject a pending item as the peer (a decider, or the peer withdrawing an item about them), with a reason."""
        return await answered(
            "reject", memory.decide(item_id=item_id, decision="reject", peer=peer, workspace=workspace, reason=reason)
        )

    @server.tool(annotations=READ_ONLY)
    async def skills_list(peer: Peer = None, workspace: Workspace = None) -> CallToolResult:
        """List the agent's approved skills: slug and description."""
        return await answered("skills_list", memory.skills(peer=peer, workspace=workspace))

    @server.tool(annotations=READ_ONLY)
    async def skill_load(
        slug: Annotated[str, Field(description="The skill's slug from skills_list.")],
        peer: Peer = None,
        workspace: Workspace = None,
    ) -> CallToolResult:
        """Load one skill's full instructions (its SKILL.md) by slug, before following it."""
        return await answered("skill_load", memory.skill(slug=slug, peer=peer, workspace=workspace))

    @server.resource("thoth://persona", name="persona", mime_type="text/markdown")
    async def persona() -> str:
        """The agent's persona stack, knowledge and skills index: the stable blocks every turn starts with."""
        return await read("thoth://persona", memory.persona())

    @server.resource("thoth://skills", name="skills", mime_type="application/json")
    async def skills() -> str:
        """The skills index: slug and description of each approved skill."""
        return await read("thoth://skills", memory.skills_index())

    return server


def core_description(tool: str, argument: str) -> str:
    """An argument's description in the core memory tool's schema (`thoth_core.memory_tools.SCHEMAS`)."""
    return str(SCHEMAS[tool]["input_schema"]["properties"][argument]["description"])


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("thoth-mcp")
    except PackageNotFoundError:
        return ""


__all__ = ["INSTRUCTIONS", "answered", "build_server"]
