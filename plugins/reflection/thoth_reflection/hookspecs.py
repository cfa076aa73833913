"""The hooks of reflection's world, declared by this plugin (`add_hookspecs`), not by the core.

The layers implement them with `@hookimpl(optionalhook=True)`, so they still load when reflection
is not installed or is disabled; `POLICIES` tells the core's dispatcher how each is called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

from thoth_core import HookPolicy, hookspec

if TYPE_CHECKING:
    from thoth_core import Runtime, Session


class ExpiringRecord(TypedDict):
    """A record past retention, offered to the nightly job (`expiring_records`)."""

    id: str
    plugin: NotRequired[str]
    at: float
    peer: str | None
    workspace: str | None
    text: str


class StoredSession(TypedDict):
    """A stored session whose transcript a plugin keeps (`transcript_index`)."""

    session_id: str
    day: str  # YYYY-MM-DD, UTC, of its start
    started_at: float


POLICIES = {
    "reflection_result": HookPolicy("each", "background"),
    "expiring_records": HookPolicy("each", "background"),
    "records_consolidated": HookPolicy("each", "background"),
    "transcript_index": HookPolicy("each", "background"),
    "transcript": HookPolicy("first", "background"),
}


@hookspec
def reflection_result(result: dict[str, Any], session: Session) -> None:
    """A validated reflection run finished; each layer writes the part it owns."""


@hookspec
def expiring_records(before: float, runtime: Runtime) -> list[ExpiringRecord] | None:
    """Records past retention (older than `before`) not yet consolidated, for the nightly job.

    Returns:
        Dicts with `id`, `plugin`, `at`, `peer`, `workspace` and `text`.
    """


@hookspec
def records_consolidated(ids: list[str], runtime: Runtime) -> None:
    """The nightly job absorbed these records; their owner may now delete them."""


@hookspec
def transcript_index(runtime: Runtime) -> list[StoredSession] | None:
    """Every stored session whose transcript this plugin keeps (the working layer), oldest first.

    Returns:
        Dicts with `session_id`, `day` (`YYYY-MM-DD`, UTC, of its start) and `started_at`.
    """


@hookspec(firstresult=True)
def transcript(session_id: str, runtime: Runtime) -> list[dict[str, Any]] | None:
    """A stored session's transcript entries (turns, errors, tool calls, session marks), or None if unknown.

    Stops at first non-None result.
    """
