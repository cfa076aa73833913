"""The values that flow through a turn (turns, replies, sessions, context blocks) and the hooks' payloads.

The payloads are `TypedDict`s: plain dicts at run time, so a plugin may keep returning dicts it
builds by hand, and typed for a plugin that annotates its implementations with them.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, Protocol, TypedDict

if TYPE_CHECKING:
    from .runtime import Runtime

Role = Literal["user", "assistant"]

DEFAULT_AGENT = "default"  # the agent of a home that names none (`[thoth] agent`, `$THOTH_AGENT`)

LAYERS = ("working", "identity", "episodic", "procedural", "reflection")

# The Sefirah each layer maps to in ADR-0003's mythic mapping (docs/concepts/memory.md).
SEFIROT = {
    "working": "Malkuth",
    "identity": "Binah",
    "episodic": "Chokmah",
    "procedural": "Yesod",
    "reflection": "Kether",
}


def layer_label(layer: str) -> str:
    """A layer's number, name and Sefirah, e.g. `L1 working · Malkuth`."""
    return f"L{LAYERS.index(layer) + 1} {layer} · {SEFIROT[layer]}"


# The `feedback` kinds and the Slack reaction (emoji name) that stands for each in every frontend.
FEEDBACK_KINDS = {
    "approve": "white_check_mark",
    "reject": "x",
    "remember": "brain",
    "forget": "wastebasket",
    "identity": "bust_in_silhouette",
}


@dataclass
class Command:
    """A slash command: `/name args`; handler(args=, turn=, session=, runtime=) -> text."""

    name: str
    help: str
    handler: Callable[..., str | Awaitable[str]]
    usage: str = ""


def new_id() -> str:
    """A short random id for turns and sessions."""
    return uuid.uuid4().hex[:16]


# What could open or close a block, a comment or a chat-template token inside quoted text: `<` (or its
# full-width and small forms) before a letter, `/`, `!`, `?` or `|`. Escaped, remembered text stays data.
MARKUP_START = re.compile(r"[<\uff1c\ufe64](?=\s*[/!?|\w])")


def quoted(text: str) -> str:
    """Text with every markup opener escaped (`<tag` as `&lt;tag`), so it can sit inside a block."""
    return MARKUP_START.sub("&lt;", text)


@dataclass(frozen=True)
class ContextBlock:
    """One piece of the system prompt, contributed by one plugin of one layer; its text is always quoted."""

    tag: str
    text: str
    layer: str = "other"
    priority: int = 50
    stable: bool = False
    plugin: str = ""

    def render(self) -> str:
        """The block as it appears in the system prompt: its text cannot close it or open another."""
        return f"<{self.tag}>\n{quoted(self.text)}\n</{self.tag}>"


@dataclass(frozen=True)
class Message:
    """One message of the conversation history sent to the model."""

    role: Role
    content: str


@dataclass
class Turn:
    """One user message on its way through the pipeline."""

    text: str
    peer: str
    thread: str
    workspace: str = "default"
    id: str = field(default_factory=new_id)
    created_at: float = field(default_factory=time.time)
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    agent: str = DEFAULT_AGENT


@dataclass
class Usage:
    """Token counts and cost the model reported for one reply."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None


CUT_SHORT = "[reply cut short]"  # ends the kept text of a reply whose stream stopped early


@dataclass
class Reply:
    """The agent's answer to one turn; `cut_short` when its stream stopped before the end (kill, model error)."""

    text: str
    model: str = ""
    usage: Usage = field(default_factory=Usage)
    finished_at: float = field(default_factory=time.time)
    error: str | None = None
    cut_short: bool = False

    @classmethod
    def cut(cls, shown: str, *, model: str = "") -> Reply:
        """The reply kept when its stream stopped early: the text shown so far, then the `CUT_SHORT` marker."""
        return cls(text=f"{shown}\n{CUT_SHORT}" if shown.strip() else CUT_SHORT, model=model, cut_short=True)


@dataclass
class Session:
    """One conversation of one peer in one thread with one agent; plugins may keep state in `scratch`.

    `agent` scopes the working and episodic layers when several agents share a home; left empty,
    it is the runtime's agent (`Runtime.agent`), else `DEFAULT_AGENT`. `started` is set once every
    `session_start` hook has returned, so a plugin's own thread can wait for what the others
    restored (the history).
    """

    workspace: str
    peer: str
    thread: str
    id: str = field(default_factory=new_id)
    started_at: float = field(default_factory=time.time)
    last_active: float = field(default_factory=time.time)
    history: list[Message] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)
    scratch: dict[str, Any] = field(default_factory=dict)
    home: Path | None = None
    ended: bool = False
    runtime: Runtime | None = field(default=None, repr=False, compare=False)
    agent: str = ""
    started: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.agent:
            own = getattr(self.runtime, "agent", None)
            self.agent = own if isinstance(own, str) and own else DEFAULT_AGENT

    @property
    def key(self) -> tuple[str, str, str]:
        """The (workspace, peer, thread) triple that names this session."""
        return (self.workspace, self.peer, self.thread)

    @property
    def is_new_thread(self) -> bool:
        """True until the first turn of this thread has been answered."""
        return not self.history

    def record(self, turn: Turn, reply: Reply) -> None:
        """Append a finished turn to the history and the transcript."""
        self.history += [Message("user", turn.text), Message("assistant", reply.text)]
        self.transcript.append(
            {
                "type": "turn",
                "turn_id": turn.id,
                "at": turn.created_at,
                "user": turn.text,
                "assistant": reply.text,
                "model": reply.model,
                "error": reply.error or turn.error,
            }
            | ({"cut_short": True} if reply.cut_short else {})
        )
        self.last_active = time.time()


@dataclass
class Cut:
    """What the context budget removed from one block."""

    plugin: str
    layer: str
    tag: str
    tokens: int
    kept_tokens: int
    reason: str


@dataclass
class PluginCall:
    """How one plugin's hook call went: its time and outcome."""

    plugin: str
    hook: str
    seconds: float
    status: Literal["ok", "error", "timeout", "bad-result", "blocked-loop"]
    error: str | None = None


# --- hook payloads ------------------------------------------------------------------------


class RecallHit(TypedDict):
    """One `recall` answer: what a layer remembers of a peer that matches the query."""

    layer: str
    kind: str
    id: str
    text: str
    score: float  # comparable within one plugin only
    why: dict[str, Any]  # how it matched: the signals
    at: float  # unix seconds


class MemoryRecord(TypedDict):
    """One thing a layer holds about a peer (`memory_records`, `memory_record`): a fact, an episode, a skill file."""

    layer: str
    kind: str  # e.g. fact, note, entity, episode, session, persona, skill, knowledge, reflexion, rule, post
    id: str  # unique across layers; what `memory_record`, `edit_memory_record` and `delete_memory_record` are given
    text: str
    at: float  # unix seconds: when it was stored (or last changed)
    plugin: NotRequired[str]  # filled in by the runtime
    editable: NotRequired[bool]  # False: read-only (edit and delete refused)
    deletable: NotRequired[bool]  # True on a record not editable that may still be deleted (an episode)
    meta: NotRequired[dict[str, Any]]  # e.g. an entity's links, an episode's thread, a file's path
    history: NotRequired[list[MemoryRecord]]  # earlier versions, newest first (`memory_record` only)


class ApprovalItem(TypedDict):
    """One item waiting for a person's decision (`approvals`); `workspace` and `peer` None: about no one person."""

    id: str
    kind: str
    title: str
    body: str
    workspace: str | None
    peer: str | None
    source: NotRequired[Any]  # session, episodes
    flags: NotRequired[list[str]]  # e.g. `injection`
    created_at: NotRequired[float]


class LayerStatus(TypedDict, total=False):
    """A layer's counts for status displays, e.g. `{"layer": "episodic", "episodes": 120}` (counts by any name)."""

    layer: str
    plugin: str  # filled in by the runtime


class LastThread(TypedDict):
    """The thread a peer was last active in (`last_thread`)."""

    thread: str
    last_active: float


class ToolDefinition(TypedDict):
    """A tool offered to the model (`turn_tools`): Anthropic-style, with a handler(input) -> str (plain or async)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: NotRequired[Callable[[dict[str, Any]], str | Awaitable[str]]]


class BundleSection(TypedDict):
    """One layer's part of a bundle (`bundle_export` answers it, `bundle_import` is given it)."""

    name: str
    version: int
    count: int  # how many records `records` yields
    records: Iterable[dict[str, Any]]  # JSON-able dicts, possibly lazy


class CheckIn(TypedDict, total=False):
    """A check-in whose time has come (`due_check_ins`)."""

    workspace: str
    peer: str
    thread: str
    text: str


ForgetReceipt = dict[str, int]  # what a plugin deleted and how many, e.g. {"episodes": 12}
DoctorLine = tuple[bool | None, str]  # (ok, what): ok None is a warning


# --- registrations ------------------------------------------------------------------------


class Register(Protocol):
    """The `register` of a `register_*` hook: `register(name, value)`; a later name replaces an earlier one."""

    def __call__(self, name: str, value: Any, /) -> None: ...


class RegisterCommand(Protocol):
    """The `register` of `register_commands`: `register(Command(...))`."""

    def __call__(self, command: Command, /) -> None: ...
