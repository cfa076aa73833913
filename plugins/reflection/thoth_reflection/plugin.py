"""L5 reflection: session-end reflection, its own writers, the approval queue, check-ins, nightly job."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from thoth_core import Command, Session, ThothPluginManager, hookimpl

from . import hookspecs, reflexion  # queue, reflect and writers load when first needed: not before a turn's reply
from .bundle import bundle_export as bundle_export  # hookimpls: registered with this module
from .bundle import bundle_import as bundle_import
from .documents import documents
from .importance import ARCHIVE_FILE
from .records import memory_record as memory_record  # hookimpls: registered with this module
from .records import memory_records as memory_records
from .records import recall as recall
from .settings import CONFIG_DEFAULTS as CONFIG_DEFAULTS  # the core reads CONFIG_DEFAULTS here
from .settings import state
from .transient import records_of

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

LAYER = "reflection"
SCRUBBED = ("items", "check_ins", "runs", "audit", "peers", "documents", "transient")  # what a forget changes


@hookimpl
def add_hookspecs(pluginmanager: ThothPluginManager) -> None:
    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def configure(runtime: Runtime) -> None:
    state(runtime)


@hookimpl
async def session_end(session: Session, reason: str) -> None:
    from .reflect import reflect

    assert session.runtime is not None  # the runtime calls session hooks with its own sessions
    await reflect(session, reason, runtime=session.runtime)


@hookimpl
def reflection_result(result: dict[str, Any], session: Session) -> None:
    from .writers import write_result

    assert session.runtime is not None
    write_result(state(session.runtime), result, session)


@hookimpl
def approvals(runtime: Runtime) -> list[dict[str, Any]]:
    from . import queue

    return queue.pending_items(state(runtime))


@hookimpl
def doctor_checks(runtime: Runtime) -> list[tuple[bool | None, str]] | None:
    """With a shared store (`[storage] url`): the queue and MEMORY.md's sections are shared; each kind of file an
    approval writes on the approving host only is one warning."""
    if not state(runtime).store.shared:
        return None
    settings = state(runtime).settings
    per_host = {
        settings.observations_file: "persona rules and guidelines approved from reflection are appended",
        f"{settings.knowledge_dir}/": "knowledge notes promoted from reflection records are written",
        f"{settings.reflexion_dir}/": "reflexion records are written (committed when the home is a git repository)",
    }
    return [(True, f"reflection: the approval queue and {settings.memory_file}'s notes and snapshot are shared")] + [
        (None, f"reflection: {where}: {what} on the approving host only; other hosts get them through git (pull)")
        for where, what in per_host.items()
    ]


@hookimpl
async def decide(
    item_id: str, decision: str, actor: str, reason: str, text: str | None, runtime: Runtime
) -> dict[str, Any] | None:
    from . import queue

    return await queue.decide(state(runtime), item_id, decision, actor=actor, reason=reason, text=text)


@hookimpl
async def hold_write(
    kind: str, text: str, record: str | None, flags: list[str], tier: str, session: Session
) -> str | None:
    """A memory write the model proposed in a turn, queued for a person (`note:` items)."""
    from . import queue

    assert session.runtime is not None  # in the loop: queueing announces the item (`Runtime.notify`)
    return queue.hold_model_write(
        state(session.runtime),
        kind=kind,
        text=text,
        record=record,
        flags=flags,
        tier=tier,
        session=session,
    )


@hookimpl
def due_check_ins(now: float, runtime: Runtime, accept: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    st = state(runtime)
    due = st.store.take_due_check_ins(now, accept)  # the others wait for the frontend they belong to
    for check_in in due:
        st.store.audit(
            "check_in_delivered",
            {"id": check_in["id"], "thread": check_in["thread"]},
            run_id=check_in["run_id"],
            session_id=check_in["session_id"],
        )
    return [{k: c[k] for k in ("id", "workspace", "peer", "thread", "text", "at", "session_id")} for c in due]


@hookimpl
def layer_status(workspace: str, peer: str, runtime: Runtime) -> dict[str, Any]:
    store = state(runtime).store
    runs = store.query("SELECT COUNT(*) AS n FROM runs WHERE workspace = ? AND peer = ?", workspace, peer)[0]["n"]
    check_ins = store.query(
        "SELECT COUNT(*) AS n FROM check_ins WHERE workspace = ? AND peer = ? AND delivered_at IS NULL", workspace, peer
    )[0]["n"]
    return {"layer": LAYER, "reflections": runs, "pending approvals": len(store.pending()), "check-ins": check_ins}


@hookimpl
def forget(peer: str, thread: str | None, workspace: str, runtime: Runtime) -> dict[str, int] | None:
    from . import queue
    from .reflect import records

    st = state(runtime)
    store = st.store
    scope = "workspace = ? AND peer = ?" + (" AND thread = ?" if thread else "")
    args = [workspace, peer] + ([thread] if thread else [])
    sessions = {r["session_id"] for r in store.query(f"SELECT session_id FROM runs WHERE {scope}", *args)}
    doomed = [
        i for i in store.all_items() if _concerns(i, workspace=workspace, peer=peer, thread=thread, sessions=sessions)
    ]
    items = [i["id"] for i in doomed]
    to_edit = queue.approved_lines(st, [i for i in doomed if i["status"] == "approved"])
    for path, line in to_edit:  # the humans approved these files: a person edits them, forget does not
        logger.warning("%s:%d: approved text derived from forgotten peer %s; edit it by hand", path, line, peer)
    whose = {"workspace": workspace, "peer": peer, **({"thread": thread} if thread else {})}
    check_ins, blanked = store.forget_rows(whose, sessions=sessions, items=items, whole_peer=thread is None)
    store.audit("forget", {"sessions": len(sessions), "items": len(items), "check_ins": check_ins, "at": time.time()})
    archived = documents(st).forget(ARCHIVE_FILE, (peer, workspace))
    transient = records(st).delete_sessions(sessions)
    with store.lock:  # the deleted rows' old pages stay in the WAL (SQLite) or as dead tuples (PostgreSQL) until then
        erased = store.db.scrub(tables=SCRUBBED)
    memory = st.memory()
    memory_lines = memory.forget((peer, workspace))
    if memory_lines and memory.sections is not None:
        memory.sections.scrub()  # the shared store's old row versions held the lines
    receipt = {
        "memory lines": memory_lines,
        "archived memory lines": archived,
        "queued items": len(items),
        "check-ins": check_ins,
        "audit entries blanked": blanked,
        "transient records": transient,
        "approved files to edit": len({path for path, _ in to_edit}),
        **erased,
    }
    return {k: v for k, v in receipt.items() if v} or None


def _concerns(item: dict[str, Any], *, workspace: str, peer: str, thread: str | None, sessions: set[str]) -> bool:
    """Whether a queued item came from this peer (in this thread; a promoted record of one of their
    sessions) or, on a whole forget, is about them."""
    source = item["source"]
    if source.get("record") and records_of(str(source["record"]), sessions):
        return True
    if (source.get("workspace"), source.get("peer")) == (workspace, peer):
        return thread is None or source.get("thread") == thread
    payload = item["payload"]
    return thread is None and payload.get("peer") == peer and payload.get("workspace", workspace) == workspace


@hookimpl
async def pre_spawn_context(session: Session) -> None:
    """No block: a turn after a failed one starts a reflexion draft about that failure, in the background."""
    reflexion.after_turn_error(session)


@hookimpl
def register_commands(register: Any) -> None:
    what = "draft a known-issue record about the last failed turn"
    register(Command("reflexion", what, reflexion.command, usage="[what went wrong]"))


@hookimpl
def register_cli_commands(cli: Any) -> None:
    from .cli import reflect_group, review

    cli.add_command(review)
    cli.add_command(reflect_group)
