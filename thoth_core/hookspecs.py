"""Every hook a Thoth plugin can implement; `docs/hooks.md` documents each one.

Hooks are always called with keyword arguments, so an implementation may accept any
subset of them. Implementations may be plain functions or `async def`; the runtime
awaits coroutines and runs plain functions in a worker thread, each plugin isolated
(an exception or a timeout is logged with the plugin's name, and the turn goes on).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    import click

    from .runtime import Runtime
    from .types import ContextBlock, Reply, Session, Turn

hookspec = pluggy.HookspecMarker("thoth")
hookimpl = pluggy.HookimplMarker("thoth")


@hookspec(historic=True)
def configure(runtime: Runtime) -> None:
    """Called once when a runtime starts, and for plugins registered later.

    Args:
        runtime: the runtime; `runtime.config.plugin(NAME)` is the plugin's own table,
            `runtime.home` its data directory.
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
def turn_tools(turn: Turn, session: Session) -> list[dict[str, Any]] | None:
    """Offer tools to the model for this turn (providers without tool support ignore them).

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
def register_models(register: Callable[..., None]) -> None:
    """Register model providers: `register(name, factory)`, factory(runtime, options) -> Model."""


@hookspec
def register_episodic_backends(register: Callable[..., None]) -> None:
    """Register episodic stores: `register(name, factory)`, factory(runtime, options) -> backend."""


@hookspec
def register_embedders(register: Callable[..., None]) -> None:
    """Register text embedders: `register(name, factory)`, factory(runtime, options) -> embedder."""


@hookspec
def register_commands(register: Callable[..., None]) -> None:
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
def register_frontends(register: Callable[..., None]) -> None:
    """Register frontends: `register(name, start)`, start(runtime, **options) runs until exit."""


@hookspec
def feedback(kind: str, turn_id: str, text: str, actor: str, session: Session) -> dict[str, Any] | None:
    """A person reacted to a message: kind is approve, reject, remember, forget or identity.

    Returns:
        What this plugin did about it (shown to the person), or None.
    """


@hookspec
def reflection_result(result: dict[str, Any], session: Session) -> None:
    """A validated reflection run finished; each layer writes the part it owns."""


@hookspec
def layer_status(workspace: str, peer: str, runtime: Runtime) -> dict[str, Any] | None:
    """Counts for status displays, e.g. `{"layer": "episodic", "episodes": 120}`."""


@hookspec
def recall(query: str, peer: str, workspace: str, limit: int, runtime: Runtime) -> list[dict[str, Any]] | None:
    """What this plugin remembers of one peer that matches a query, best first, at most `limit` items.

    Returns:
        Dicts with `layer`, `kind`, `id`, `text`, `score` (comparable within the plugin only),
        `why` (how it matched: a dict of signals) and `at` (unix seconds); only the named peer's items.
    """


@hookspec
def last_thread(peer: str, workspace: str, runtime: Runtime) -> dict[str, Any] | None:
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
def approvals(runtime: Runtime) -> list[dict[str, Any]] | None:
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


@hookspec
def workspace_admin(peer: str, workspace: str, runtime: Runtime) -> bool | None:
    """Whether a person administers a workspace, as the frontend serving it knows (Slack: users.info).

    Asked by the approvals policy only while `[thoth] founders` is empty, for someone who is not the
    home's owner: an admin decides the items of their workspace.

    Returns:
        True or False for a workspace this plugin serves, None for any other.
    """


@hookspec
def doctor_checks(runtime: Runtime) -> list[tuple[bool | None, str]] | None:
    """`thoth doctor` lines of this plugin: (ok, what), e.g. `(False, "honcho: 401 at http://...: bad key")`;
    ok None is a warning (shown, not a failure), e.g. state kept on this host only while a store is shared."""


@hookspec
def notify(event: str, payload: dict[str, Any], runtime: Runtime) -> None:
    """Tell people something (`approval_requested`, `persona_observation`, `check_in`, ...).

    Frontends deliver it; payload has `text` and, where it applies, `workspace`, `peer`,
    `thread` and `item_id`.
    """


@hookspec
def due_check_ins(
    now: float, runtime: Runtime, accept: Callable[[dict[str, Any]], bool]
) -> list[dict[str, Any]] | None:
    """Check-ins whose time has come (workspace, peer, thread, text) that `accept` takes; returning marks delivered.

    An impl should return (and mark delivered) only items for which `accept(item)` is true, leaving
    the others for the frontend they belong to; the runtime drops any other item it is given. A plain
    impl runs on a worker thread, so `accept` must be quick and thread-safe; the call gets the plugin's
    background deadline.
    """


@hookspec
def expiring_records(before: float, runtime: Runtime) -> list[dict[str, Any]] | None:
    """Records past retention (older than `before`) not yet consolidated, for the nightly job.

    Returns:
        Dicts with `id`, `plugin`, `at`, `peer`, `workspace` and `text`.
    """


@hookspec
def records_consolidated(ids: list[str], runtime: Runtime) -> None:
    """The nightly job absorbed these records; their owner may now delete them."""


@hookspec
def transcript_index(runtime: Runtime) -> list[dict[str, Any]] | None:
    """Every stored session whose transcript this plugin keeps (the working layer), oldest first.

    Returns:
        Dicts with `session_id`, `day` (`YYYY-MM-DD`, UTC, of its start) and `started_at`.
    """


@hookspec(firstresult=True)
def transcript(session_id: str, runtime: Runtime) -> list[dict[str, Any]] | None:
    """A stored session's transcript entries (turns, errors, tool calls, session marks), or None if unknown."""


@hookspec
def bundle_export(runtime: Runtime) -> dict[str, Any] | None:
    """This plugin's part of `thoth bundle export`: everything its layer holds, backend-independent.

    Returns:
        `{"name": SECTION, "version": int, "count": int, "records": iterable of JSON-able dicts}`
        (records may be lazy; `count` is how many it yields), or None if the plugin holds no data.
    """


@hookspec(firstresult=True)
def bundle_import(section: dict[str, Any], runtime: Runtime, progress: Callable[[int], None]) -> dict[str, int] | None:
    """Add a bundle section's records to this plugin's store, skipping what it holds already.

    Only the plugin whose section `name` it is answers (None otherwise); it calls `progress(n)` as
    records are stored and raises ThothError on a `version` newer than it reads.

    Returns:
        Counts of what was added, e.g. `{"episodes": 12}`.
    """
