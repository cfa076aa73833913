"""Every hook of the core protocol, and how each is called; `docs/hooks.md` documents each one.

Hooks are always called with keyword arguments, so an implementation may accept any
subset of them. Implementations may be plain functions or `async def`; the runtime
awaits coroutines and runs plain functions in a worker thread, each plugin isolated
(an exception or a timeout is logged with the plugin's name, and the turn goes on).

`POLICIES` is the one table of how the dispatcher (`thoth_core._calls`) calls each hook: its
style, its deadline and whether a failure is isolated. A plugin that declares hooks of its own
(`add_hookspecs`) gives its hookspecs module a `POLICIES` table of the same shape; the plugin
manager checks each policy against the spec's `firstresult` and `historic` options.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    import click

    from .manager import ThothPluginManager
    from .runtime import Runtime
    from .types import (
        ApprovalItem,
        BundleSection,
        CheckIn,
        ContextBlock,
        DoctorLine,
        LastThread,
        LayerStatus,
        MemoryRecord,
        RecallHit,
        Register,
        RegisterCommand,
        Reply,
        Session,
        ToolDefinition,
        Turn,
    )

hookspec = pluggy.HookspecMarker("thoth")
hookimpl = pluggy.HookimplMarker("thoth")

Style = Literal["each", "first", "historic", "sync"]
DeadlineKind = Literal["turn", "background", "none"]


@dataclass(frozen=True)
class HookPolicy:
    """How the dispatcher calls one hook.

    `style`: `each` calls every implementation concurrently; `first` calls them one at a time in
    pluggy's order and stops at the first non-None result (the spec is `firstresult`); `historic`
    calls every plugin on the caller's thread and replays the call for a plugin registered later
    (the spec is `historic`); `sync` calls every plugin on the caller's thread (registries, CLI, init).
    `deadline`: `turn` (`Runtime.deadline_for`), `background` (`Runtime.background_deadline`) or
    `none`; calls on the caller's thread never have one. `isolated`: a failing plugin is logged and
    skipped (a ConfigError from a call on the caller's thread still stops the command); False, the
    failure reaches the caller.
    """

    style: Style
    deadline: DeadlineKind
    isolated: bool = True

    @property
    def firstresult(self) -> bool:
        """Whether the call stops at the first non-None result."""
        return self.style == "first"

    @property
    def historic(self) -> bool:
        """Whether plugins registered later get the call too."""
        return self.style == "historic"

    @property
    def in_caller_thread(self) -> bool:
        """Whether implementations run one after another on the caller's thread, without a deadline."""
        return self.style in ("sync", "historic")

    @classmethod
    def of_spec(cls, opts: Mapping[str, Any]) -> HookPolicy:
        """The policy of a spec whose module gives none: its own options, background deadline."""
        if opts.get("firstresult"):
            return cls("first", "background")
        if opts.get("historic"):
            return cls("historic", "none")
        return cls("each", "background")


POLICIES: dict[str, HookPolicy] = {
    "configure": HookPolicy("historic", "none"),
    "add_hookspecs": HookPolicy("historic", "none"),
    "pre_spawn_context": HookPolicy("each", "turn"),
    "turn_tools": HookPolicy("each", "turn"),
    "post_turn_write": HookPolicy("each", "background"),
    "session_start": HookPolicy("each", "turn"),
    "session_closed": HookPolicy("first", "turn"),
    "session_end": HookPolicy("each", "background"),
    "forget": HookPolicy("each", "background"),
    "register_models": HookPolicy("sync", "none"),
    "register_episodic_backends": HookPolicy("sync", "none"),
    "register_embedders": HookPolicy("sync", "none"),
    "register_commands": HookPolicy("sync", "none"),
    "register_cli_commands": HookPolicy("sync", "none"),
    "init_home": HookPolicy("sync", "none"),
    "register_frontends": HookPolicy("sync", "none"),
    "feedback": HookPolicy("each", "background"),
    "layer_status": HookPolicy("each", "turn"),
    "recall": HookPolicy("each", "background"),
    "last_thread": HookPolicy("each", "turn"),
    "idle_sessions": HookPolicy("each", "background"),
    "approvals": HookPolicy("each", "background"),
    "decide": HookPolicy("first", "background"),
    "hold_write": HookPolicy("first", "background"),
    "workspace_admin": HookPolicy("each", "background"),
    "doctor_checks": HookPolicy("each", "background"),
    "notify": HookPolicy("each", "background"),
    "due_check_ins": HookPolicy("each", "background"),
    "bundle_export": HookPolicy("sync", "none", isolated=False),
    "bundle_import": HookPolicy("first", "none", isolated=False),
    "memory_records": HookPolicy("each", "background"),
    "memory_record": HookPolicy("first", "background"),
    "edit_memory_record": HookPolicy("first", "background"),
    "delete_memory_record": HookPolicy("first", "background"),
}


@hookspec(historic=True)
def configure(runtime: Runtime) -> None:
    """Called once when a runtime starts, and for plugins registered later.

    Args:
        runtime: the runtime; `runtime.config.plugin(NAME)` is the plugin's own table,
            `runtime.home` its data directory.
    """


@hookspec(historic=True)
def add_hookspecs(pluginmanager: ThothPluginManager) -> None:
    """Declare the hooks this plugin's world adds: `pluginmanager.add_hookspecs(module)`.

    Called as the plugin is registered (before any hook implementation is checked), in the style of
    pytest's `pytest_addhooks`. The module holds `@hookspec` functions and a `POLICIES` table
    (hook name -> `HookPolicy`); implementers of such hooks mark them `@hookimpl(optionalhook=True)`
    so they still load when the declaring plugin is not installed.

    Args:
        pluginmanager: the plugin manager being built.
    """


@hookspec
def pre_spawn_context(turn: Turn, session: Session) -> ContextBlock | list[ContextBlock] | None:
    """Contribute context for this turn before the model is called.

    All implementations run concurrently, each under its deadline (`[thoth] deadline`, or
    `[plugins.NAME] deadline`); late or failing ones are skipped and logged.

    Args:
        turn: the user's message, peer, thread and workspace.
        session: the session the turn belongs to.

    Returns:
        A block, a list of blocks, or None. The core fills in `plugin` and fits the blocks
        into the token budgets.
    """


@hookspec
def turn_tools(turn: Turn, session: Session) -> list[ToolDefinition] | None:
    """Offer tools to the model for this turn (asked only when the turn's model runs tools: its `tool_types`).

    Called with `pre_spawn_context`, under the same deadline.

    Returns:
        Anthropic-style tool definitions (`name`, `description`, `input_schema`) each with a
        `handler(input) -> str` (plain or async); the runtime records every call in the
        session transcript.
    """


@hookspec
def post_turn_write(turn: Turn, reply: Reply, session: Session) -> None:
    """Record a finished turn; called in the background after the reply reached the user.

    Args:
        turn: the user's message.
        reply: the agent's reply (already delivered).
        session: the session, with the turn already in `session.history`.
    """


@hookspec
def session_start(session: Session) -> None:
    """A session was opened (new, or resumed after a restart); restore state into it."""


@hookspec(firstresult=True)
def session_closed(session: Session) -> bool | None:
    """Whether another process sharing the store ended this open session (the runtime then opens a fresh one).

    An implementation may also raise `session.last_active` to when another process last answered in it.
    Stops at first non-None result.
    """


@hookspec
def session_end(session: Session, reason: str) -> None:
    """A session ended, once per session, in the background.

    Args:
        session: the ended session; `session.transcript` holds its turns.
        reason: `done`, `idle`, `exit` or a frontend-specific word.
    """


@hookspec
def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime, wait: float) -> dict[str, int] | None:
    """Delete everything this plugin holds about a peer (or one thread of theirs).

    A plugin whose remote service deletes in the background (Honcho's queue) may poll up to
    `wait` seconds (`thoth forget --wait`; 0: don't) and report what is left.

    Returns:
        A receipt: what was deleted and how many, e.g. `{"episodes": 12}`; None if nothing held.
    """


@hookspec
def register_models(register: Register) -> None:
    """Register model providers: `register(name, factory)`, factory(runtime, options) -> Model."""


@hookspec
def register_episodic_backends(register: Register) -> None:
    """Register episodic stores: `register(name, factory)`, factory(runtime, options) -> backend."""


@hookspec
def register_embedders(register: Register) -> None:
    """Register text embedders: `register(name, factory)`, factory(runtime, options) -> embedder."""


@hookspec
def register_commands(register: RegisterCommand) -> None:
    """Register slash commands: `register(Command(name, help, handler))`."""


@hookspec
def register_cli_commands(cli: click.Group) -> None:
    """Add subcommands to the `thoth` command line."""


@hookspec
def init_home(root: Path) -> list[str] | None:
    """Write this plugin's default files into a new agent home (`thoth init`); never overwrite.

    Returns:
        The paths written, relative to root.
    """


@hookspec
def register_frontends(register: Register) -> None:
    """Register frontends: `register(name, start)`, start(runtime, **options) runs until exit."""


@hookspec
def feedback(kind: str, turn_id: str, text: str, actor: str, session: Session) -> dict[str, Any] | None:
    """A person reacted to a message: kind is approve, reject, remember, forget or identity.

    Returns:
        What this plugin did about it (shown to the person), or None.
    """


@hookspec
def layer_status(workspace: str, peer: str, runtime: Runtime) -> LayerStatus | None:
    """Counts for status displays, e.g. `{"layer": "episodic", "episodes": 120}`."""


@hookspec
def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[RecallHit] | None:
    """What this plugin remembers of one peer that matches a query, best first, at most `limit` items.

    `runtime.meaning.rank` ranks texts by meaning and words for a plugin that holds no index of its own.
    `Runtime.recall` fuses every plugin's list into one: by each hit's rank in its list and, where
    `why["dense"]` holds the query's cosine (from `runtime.meaning`'s embedder), by meaning across plugins.

    Returns:
        Dicts with `layer`, `kind`, `id`, `text`, `score` (comparable within the plugin only),
        `why` (how it matched: a dict of signals) and `at` (unix seconds); only the named peer's items.
    """


@hookspec
def last_thread(peer: str, workspace: str, runtime: Runtime) -> LastThread | None:
    """The thread this peer was last active in, for a frontend that reopens it on start.

    Returns:
        `{"thread": NAME, "last_active": unix seconds}`, or None if the plugin keeps no sessions;
        `runtime.last_thread` picks the most recent answer.
    """


@hookspec
def idle_sessions(before: float, runtime: Runtime) -> list[Session] | None:
    """Stored sessions no live process holds, last active before `before`, for the runtime to end as `idle`.

    Each is claimed (closed in the store) as it is returned, so two processes never both get it.

    Returns:
        Sessions restored from the store (id, history, transcript); None if the plugin keeps no sessions.
    """


@hookspec
def approvals(runtime: Runtime) -> list[ApprovalItem] | None:
    """Every item of this plugin waiting for a person's decision (skill drafts, persona observations, ...).

    Return them all: the runtime applies the approvals policy (`thoth_core.approvals`), so a frontend
    shows each person only what they may see, and a plugin checks no one.

    Returns:
        Dicts with at least `id`, `kind`, `title`, `body`, `workspace` and `peer` (whom the item is
        about; both None for an item about no one person, which only deciders see), `source`
        (session, episodes), `flags` (e.g. `injection`) and `created_at`; None if the plugin owns
        no queue. An item without `workspace` and `peer` is logged and shown to deciders only.
    """


@hookspec(firstresult=True)
def decide(
    item_id: str, decision: str, actor: str, reason: str, text: str | None, runtime: Runtime
) -> dict[str, Any] | None:
    """Apply `approve`, `reject` or `edit` (with new `text`) to a pending item.

    The runtime calls it only once the approvals policy allowed `actor` this decision on the item,
    so the plugin keeps its storage logic and checks no one. Stops at first non-None result: only
    the plugin that owns `item_id` answers.
    """


@hookspec(firstresult=True)
def hold_write(kind: str, text: str, record: str | None, flags: list[str], tier: str, session: Session) -> str | None:
    """Keep a memory write the model proposed (a tool call) in the approval queue, for a person to decide.

    The runtime calls it when the write policy does not apply the write by itself. Stops at first
    non-None result: the plugin that keeps such items answers.

    Args:
        kind: `remember` (a note about the session's peer) or `correct` (new text for one of their records).
        text: the text, already refused when it holds a secret or cannot be stored.
        record: the record `correct` changes (an id `memory_record` knows), else None.
        flags: why the write policy held it (e.g. `instruction`, `other-peer`, `unjudged`).
        tier: the write policy's tier of the text.
        session: the session whose model proposed it: the item is about its peer and workspace.

    Returns:
        The approvals item id (the pending twin's, when the same write waits already), or None.
    """


@hookspec
def workspace_admin(peer: str, workspace: str, runtime: Runtime) -> bool | None:
    """Whether a person administers a workspace, as the frontend serving it knows (Slack: users.info).

    Asked by the approvals policy only while `[thoth] founders` is empty, for someone who is not the
    home's owner: an admin decides the items of their workspace.

    Returns:
        True or False for a workspace this plugin serves, None for any other.
    """


@hookspec
def doctor_checks(runtime: Runtime) -> list[DoctorLine] | None:
    """`thoth doctor` lines of this plugin: (ok, what), e.g. `(False, "honcho: 401 at http://...: bad key")`;
    ok None is a warning (shown, not a failure), e.g. state kept on this host only while a store is shared."""


@hookspec
def notify(event: str, payload: dict[str, Any], runtime: Runtime) -> None:
    """Tell people something (`approval_requested`, `persona_observation`, `check_in`, ...).

    Frontends deliver it; payload has `text` and, where it applies, `workspace`, `peer`,
    `thread` and `item_id`.
    """


@hookspec
def due_check_ins(now: float, runtime: Runtime, accept: Callable[[CheckIn], bool]) -> list[CheckIn] | None:
    """Check-ins whose time has come (workspace, peer, thread, text) that `accept` takes; returning marks delivered.

    An impl should return (and mark delivered) only items for which `accept(item)` is true, leaving
    the others for the frontend they belong to; the runtime drops any other item it is given. A plain
    impl runs on a worker thread, so `accept` must be quick and thread-safe; the call gets the plugin's
    background deadline.
    """


@hookspec
def bundle_export(runtime: Runtime) -> BundleSection | None:
    """This plugin's part of `thoth bundle export`: everything its layer holds, backend-independent.

    Returns:
        `{"name": SECTION, "version": int, "count": int, "records": iterable of JSON-able dicts}`
        (records may be lazy; `count` is how many it yields), or None if the plugin holds no data.
    """


@hookspec(firstresult=True)
def bundle_import(section: BundleSection, runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add a bundle section's records to this plugin's store, skipping what it holds already.

    Only the plugin whose section `name` it is answers (None otherwise; stops at first non-None result);
    it calls `progress(n)` as records are stored and raises ThothError on a `version` newer than it reads.

    Returns:
        Counts of what was added, e.g. `{"episodes": 12}`.
    """


@hookspec
def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord] | None:
    """What this plugin holds about one peer, newest first: for the inspector and `/v1/.../records`.

    Args:
        peer: whose records; never return another peer's.
        workspace: the workspace the peer is in.
        runtime: the runtime.
        kind: only records of this kind (`fact`, `episode`, ...), or None for every kind.
        limit: at most this many records.
        before: only records older than this (unix seconds, exclusive), or None: paging back.

    Returns:
        Dicts with `layer`, `kind`, `id` (unique across layers), `text`, `at`, and `editable` (False for
        read-only kinds) and `meta` where they apply; None if the plugin holds no records.
    """


@hookspec(firstresult=True)
def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    """One of the peer's records by id, with its `history` (earlier versions, newest first) where it has one.

    Stops at first non-None result: only the plugin that owns `record_id` answers, and only when the
    record is this peer's (another peer's record is None, as an unknown id is).
    """


@hookspec(firstresult=True)
def edit_memory_record(record_id: str, text: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    """Replace one of the peer's records with `text`, as the layer's own correction command does (`/correct`).

    The runtime has refused text no store can keep and secrets before calling. Stops at first non-None result:
    only the owner of an editable record of this peer answers.

    Returns:
        The record as it now stands (its id may be new: a corrected fact supersedes the old one), or None.
    """


@hookspec(firstresult=True)
def delete_memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> bool | None:
    """Delete one of the peer's records, as the layer's own correction command does (`/correct ID delete`).

    Stops at first non-None result: only the owner of a deletable record of this peer answers.

    Returns:
        True once deleted; None for a record this plugin does not own, of another peer, or read-only.
    """
