"""L1 working memory: sessions survive restarts, turns and errors land in transcripts, MEMORY.md is read per session.

MEMORY.md is read at session start; with a shared store (`[storage] url`) before each turn instead,
its marked sections as the store holds them (`thoth_core.sections`), so a note written on any host
shows on every host's next turn.

A session resumes (same id, history restored from its transcript) when its stored record has
not closed, this runtime is not ending it, and it was active within `[thoth] idle_minutes`; a
thread has one open session whichever process opens it (`SessionStore.open`). It
closes for good on any `session_end` except `exit` (a frontend shutting down), so `/done` or the
idle timeout start the thread afresh while a restart continues it.
A stored session idle past the limit that no live session holds (or one set aside as `expired` when
its thread reopened) goes to the core through `idle_sessions` (claimed once across processes),
which ends it as `idle`.
History trimming to `[budget] history` is the core's; this plugin only supplies the history.
With a shared store (`[storage] url`) several workers may answer one thread in turn: before each
turn a live session takes in the turns other workers stored since (`SessionStore.catch_up`).
Sessions belong to the runtime's agent (`[thoth] agent`): agents sharing a home neither resume,
reap nor count each other's sessions; forgetting a peer removes its sessions with every agent.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from thoth_core import ContextBlock, DoctorLine, LastThread, Session, ThothError, Turn, count_tokens, hookimpl
from thoth_core.runtime import MISSING_CONTEXT
from thoth_core.sections import home_sections

from .bundle import bundle_export as bundle_export  # hookimpls: registered with this module
from .bundle import bundle_import as bundle_import
from .memory_file import read_memory, visible_memory
from .recall import recall as recall  # hookimpls: registered with this module
from .records import memory_record as memory_record  # hookimpls: registered with this module
from .records import memory_records as memory_records
from .state import CONFIG_DEFAULTS as CONFIG_DEFAULTS  # the core reads CONFIG_DEFAULTS here
from .state import state
from .transcripts import day_of

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

LAYER = "working"
MEMORY_PRIORITY = 90
WITHOUT_CONTEXT = "turns without context"  # the status key naming what recent turns went without


def session_memory(session: Session) -> str:
    """The lines of MEMORY.md this session's peer may see."""
    assert session.runtime is not None  # the runtime calls session hooks with its own sessions
    working = state(session.runtime)
    text = read_memory(working.settings.memory_file, home_sections(session.runtime))
    return visible_memory(text, peer=session.peer, workspace=session.workspace)


def tail_within(text: str, budget: int) -> str:
    """The last lines of text that cost at most budget tokens (newest notes are appended last)."""
    kept: list[str] = []
    used = 0
    for line in reversed(text.splitlines()):
        cost = count_tokens(line)
        if used + cost > budget:
            break
        kept.append(line)
        used += cost
    return "\n".join(reversed(kept)).strip()


def memory_block(runtime: Runtime, text: str) -> ContextBlock | None:
    """MEMORY.md as a stable block, cut from the top to fit the working layer's budget."""
    budget = runtime.config.layer_budgets.get(LAYER)
    if budget is not None:
        text = tail_within(text, budget - count_tokens(ContextBlock("memory", "").render()))
    return ContextBlock(tag="memory", text=text, stable=True, priority=MEMORY_PRIORITY) if text else None


@hookimpl
def configure(runtime: Runtime) -> None:
    state(runtime)


@hookimpl
def session_start(session: Session) -> None:
    runtime = session.runtime
    assert runtime is not None
    working = state(runtime)

    def ending(session_id: str) -> bool:  # the one this runtime's `session_end` is closing
        live = working.live.get(session_id)
        return live is not None and live.ended

    idle_seconds = float(runtime.config.get("thoth.idle_minutes")) * 60
    failures: tuple[type[BaseException], ...] = (ThothError, *working.store.errors)
    try:
        stored = working.store.open(session, idle_seconds=idle_seconds, ending=ending)
    except failures as exc:  # a full disk, a store that is down
        logger.error("working: session %s: not indexed now (%s); its first stored turn indexes it", session.id, exc)
        stored = None
    if stored is not None:  # another process (or an earlier one) opened this thread's session: continue it
        working.store.resume(session, stored, turns=working.settings.restore_turns)
    working.live[session.id] = session
    if home_sections(runtime).shared:
        return  # read before each turn instead: what another host wrote shows at once
    try:
        working.memory[session.id] = session_memory(session)
    except ThothError as exc:
        logger.error("%s", exc)


@hookimpl
def session_closed(session: Session) -> bool | None:
    assert session.runtime is not None
    working = state(session.runtime)
    stored = working.store.get(session.id)
    if stored is None or stored.closed is None:
        if stored is not None:
            session.last_active = max(session.last_active, stored.last_active)  # another worker answered since
        return None
    working.live.pop(session.id, None)
    working.memory.pop(session.id, None)
    return True


@hookimpl
def pre_spawn_context(turn: Turn, session: Session) -> ContextBlock | None:
    assert session.runtime is not None
    working = state(session.runtime)
    working.store.flush(session)  # the errors of a failed previous turn reach the transcript now
    working.store.catch_up(session, turns=working.settings.restore_turns)  # turns other workers answered since
    working.store.take_back_cut_short(session, turn.id)  # a turn kept cut short, run again: answered once
    # shared: the store's sections each turn; a store that does not answer fails at once (counted missing context)
    text = session_memory(session) if home_sections(session.runtime).shared else working.memory.get(session.id)
    return memory_block(session.runtime, text) if text else None


@hookimpl
def post_turn_write(turn: Turn, session: Session) -> None:
    assert session.runtime is not None
    store = state(session.runtime).store
    store.flush(session)
    missing = turn.extra.get(MISSING_CONTEXT)
    if isinstance(missing, dict):  # a model turn (commands gather no context)
        store.context_log.note(turn.id, turn.created_at, session.agent, missing)


@hookimpl
def session_end(session: Session, reason: str) -> None:
    assert session.runtime is not None
    working = state(session.runtime)
    working.store.end(session, reason, resumable=reason == "exit")
    working.memory.pop(session.id, None)
    working.live.pop(session.id, None)


@hookimpl
def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime) -> dict[str, int] | None:
    working = state(runtime)
    for session in [s for s in working.live.values() if s.key[:2] == (workspace, peer)]:
        if thread is None or session.thread == thread:
            working.live.pop(session.id)
            working.memory.pop(session.id, None)
    receipt = working.store.forget(workspace, peer, thread)
    return receipt if any(receipt.values()) else None


@hookimpl
def idle_sessions(before: float, runtime: Runtime) -> list[Session]:
    working = state(runtime)
    found = []
    for stored in working.store.claim_idle(before, held=set(working.live), agent=runtime.agent):
        session = Session(
            stored.workspace, stored.peer, stored.thread, home=runtime.home, runtime=runtime, agent=stored.agent
        )
        working.store.restore(session, stored, turns=working.settings.restore_turns)
        session.last_active = stored.last_active
        found.append(session)
    return found


@hookimpl
def last_thread(peer: str, workspace: str, runtime: Runtime) -> LastThread | None:
    stored = state(runtime).store.last_active(workspace, peer, agent=runtime.agent)
    return {"thread": stored.thread, "last_active": stored.last_active} if stored is not None else None


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
def transcript_index(runtime: Runtime) -> list[dict[str, Any]]:
    return [
        {"session_id": s.session_id, "day": day_of(s.started_at), "started_at": s.started_at}
        for s in state(runtime).store.every()
    ]


@hookimpl(optionalhook=True)  # declared by reflection (its hookspecs), when it is installed
def transcript(session_id: str, runtime: Runtime) -> list[dict[str, Any]] | None:
    store = state(runtime).store
    stored = store.get(session_id)
    return None if stored is None else store.entries(session_id, stored.started_at)


@hookimpl
def layer_status(workspace: str, peer: str, runtime: Runtime) -> dict[str, Any]:
    store = state(runtime).store
    missing = store.context_log.recent(runtime.agent).summary()
    return {"layer": LAYER, **store.counts(workspace, peer, agent=runtime.agent)} | (
        {WITHOUT_CONTEXT: missing} if missing else {}
    )


@hookimpl
def doctor_checks(runtime: Runtime) -> list[DoctorLine]:
    missing = state(runtime).store.context_log.recent(runtime.agent)
    if not missing.turns:
        return []
    if not missing.by_plugin:
        return [(True, f"context: each of the last {missing.turns} turns had every plugin's context")]
    return [(False, line) for line in missing.lines()]
