"""Reflection's part of the approval queue: persona observations, held notes, knowledge promotions,
reflexion records and their promotion into guidelines.

Item ids are `persona:<id>` (a persona observation), `note:<id>` (a memory note or identity
update held by the firewall), `knowledge:<id>` (a transient record to promote), `reflexion:<id>`
(a drafted known-issue record, written to `reflexion/` when approved), `guideline:<id>` (a
reflexion record promoted into the persona rules, the record then marked `promoted`) and
`restore:<id>` (an approved memory line the nightly job removed: approving puts it back in
MEMORY.md, rejecting lets the removal stand). Who may
decide is the runtime's approvals policy (`thoth_core.approvals`): each item names the workspace
and peer of the session it came from (none for knowledge and guideline promotions, which change
what every conversation sees); every decision is audited.

One item per proposal: a proposal identical to an item still pending (same kind, owner, payload
and normalized text, also the text it had before an edit) is not queued again; the existing id
is returned, the repeat is audited as `duplicate` and its session is added to the item's
`source["also"]`. A proposal a session made itself (persona observation, held note, identity
update) is also matched against decided items: once a person rejected it, a later session
proposing it again does not bring it back, and once approved it is applied already. A knowledge
promotion is a person's own request, so only a pending twin stops it.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from thoth_core import Session, ThothError
from thoth_core.git import git_commit
from thoth_core.redact import redactor_of
from thoth_core.storage import write_atomic
from thoth_core.types import new_id

from . import reflexion_files
from .claims import claimed
from .memory import append_knowledge
from .schema import SLUG, utc_day
from .settings import NAME, State

logger = logging.getLogger(__name__)

PREFIXES = {
    "persona": "persona-observation",
    "note": None,
    "knowledge": "knowledge",
    "reflexion": "reflexion",
    "guideline": "guideline",
    "restore": "restore-note",
}
CORRECTION_KIND = "correction"  # new text for one of a peer's records, proposed by a turn's model
RESTORE_KIND = "restore-note"  # an approved MEMORY.md line nightly removed; approving it puts the line back
DECIDED_COUNT = ("persona-observation", "memory-note", "user-model", CORRECTION_KIND)  # kinds a decided twin also stops
ALSO_LIMIT = 50  # extra sessions remembered on one item (the count goes on in `repeats`)
RULES_HEADING = "## Learned from reflection"
DECISION_MARGIN = 60.0  # a decision's claim outlasts its deadline by this: a dead worker's frees the item then
DECISION_WAIT = 5.0  # how long a decision waits for another worker deciding the same item


def source_of(session: Session, run_id: str | None) -> dict[str, Any]:
    """Where an item came from: session, run, and the turns (episodes) of that session."""
    episodes = [t["turn_id"] for t in session.transcript if t.get("type") == "turn" and t.get("turn_id")]
    return {
        "session": session.id,
        "run": run_id,
        "workspace": session.workspace,
        "peer": session.peer,
        "thread": session.thread,
        "episodes": episodes,
    }


def hold(
    st: State,
    *,
    kind: str,
    title: str,
    text: str,
    session: Session,
    run_id: str | None,
    flags: list[str],
    payload: dict[str, Any] | None = None,
    tier: str = "",
) -> str:
    """Queue a held note (`memory-note` or `user-model`) of a risk tier and announce it; returns its id."""
    return _queue(
        st,
        f"note:{new_id()}",
        kind=kind,
        title=title,
        text=text,
        source=source_of(session, run_id),
        flags=flags,
        payload=payload or {},
        tier=tier,
    )


def hold_model_write(
    st: State, *, kind: str, text: str, record: str | None, flags: list[str], tier: str, session: Session
) -> str | None:
    """Queue a write a turn's model proposed (`remember`, `correct`) that the write policy held; its item id."""
    if kind == "remember":
        what, title, payload = "user-model", f"identity update about {session.peer}", {"peer": session.peer}
    elif kind == "correct" and record:
        what, title, payload = CORRECTION_KIND, f"correct {session.peer}'s record {record}", {"record": record}
    else:
        return None
    title += " (proposed by the model in a turn)"
    return hold(
        st, kind=what, title=title, text=text, session=session, run_id=None, flags=flags, payload=payload, tier=tier
    )


def observe(st: State, *, text: str, session: Session, run_id: str, flags: list[str], tier: str = "") -> str:
    """Queue a persona observation and send it to the founders; returns its id (a pending twin's, if any)."""
    item_id = f"persona:{new_id()}"
    queued = _queue(
        st,
        item_id,
        kind="persona-observation",
        title=_title(text),
        text=text,
        source=source_of(session, run_id),
        flags=flags,
        payload={},
        announce=False,
        tier=tier,
    )
    if queued != item_id:
        return queued
    st.runtime.notify(
        "persona_observation",
        text=f"Persona observation for review ({item_id}{', tier: ' + tier if tier else ''}): {text}",
        item_id=item_id,
        title="Persona observation (never applied without a founder)",
        founders=st.founders,
        flags=flags,
        tier=tier,
        workspace=session.workspace,
        peer=session.peer,
        thread=session.thread,
    )
    return item_id


def propose_promotion(st: State, *, record_id: str, topic: str, text: str, actor: str) -> str:
    """Queue a transient record for promotion into `knowledge/<topic>.md`; returns the item id."""
    if not SLUG.match(topic) or len(topic) > 64:
        raise ThothError(f"topic {topic!r} is not a slug (lowercase letters, digits, single hyphens)")
    item_id = f"knowledge:{new_id()}"
    source = {"record": record_id, "proposed_by": actor}
    return _queue(
        st,
        item_id,
        kind="knowledge",
        title=f"promote {record_id} into knowledge/{topic}.md",
        text=text,
        source=source,
        flags=[],
        payload={"record": record_id, "topic": topic},
    )


def propose_reflexion(
    st: State, *, name: str, text: str, session: Session, error_turn: str, flags: list[str], note: str = ""
) -> str:
    """Queue a drafted reflexion record (file `name` once approved); returns the item id (a pending twin's, if any)."""
    issue = text.split("## Known Issue", 1)[-1].strip().split("\n", 1)[0]
    return _queue(
        st,
        f"reflexion:{new_id()}",
        kind="reflexion",
        title=f"reflexion record {name}: {_title(issue)}",
        text=text,
        source=dict(source_of(session, None), error_turn=error_turn, **({"note": note} if note else {})),
        flags=flags,
        payload={"name": name},
    )


def propose_guideline(st: State, *, record: str, text: str, actor: str) -> str:
    """Queue a reflexion record's promotion into a guideline of the persona rules; returns the item id."""
    return _queue(
        st,
        f"guideline:{new_id()}",
        kind="guideline",
        title=f"promote reflexion/{record} into a guideline ({st.settings.observations_file})",
        text=" ".join(text.split()),
        source={"reflexion": record, "proposed_by": actor},
        flags=[],
        payload={"reflexion": record},
    )


def propose_restore(st: State, *, text: str, day: str, owner: tuple[str, str] | None, removed_on: str, why: str) -> str:
    """Queue putting back an approved MEMORY.md line the nightly job removed; returns the item id (a pending twin's)."""
    source = {"workspace": owner[1], "peer": owner[0]} if owner else {}
    return _queue(
        st,
        f"restore:{new_id()}",
        kind=RESTORE_KIND,
        title=f"restore an approved note nightly removed on {removed_on} ({why}): {_title(text)}",
        text=text,
        source=dict(source, removed_on=removed_on, why=why),
        flags=[],
        payload={"day": day},
    )


def normalized(text: str) -> str:
    """Text as compared for duplicates: case, runs of whitespace and end punctuation ignored."""
    return " ".join(text.casefold().split()).strip(" .!;:,")


def _twin(st: State, *, kind: str, text: str, source: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any] | None:
    """The item this proposal repeats: same kind, owner, payload and normalized text; pending first."""
    owner = (source.get("workspace"), source.get("peer"))
    wanted = normalized(text)
    twins = [
        item
        for item in st.store.items_of_kind(kind)
        if (item["source"].get("workspace"), item["source"].get("peer")) == owner
        and item["payload"] == payload
        and wanted in (normalized(item["text"]), normalized(str(item["source"].get("proposed", ""))))
        and (item["status"] == "pending" or kind in DECIDED_COUNT)
    ]
    return min(twins, key=lambda i: (i["status"] != "pending", i["created_at"])) if twins else None


def _also(item: dict[str, Any], source: dict[str, Any]) -> dict[str, Any] | None:
    """The item's source with this repeat's session added; None when that session is already named."""
    mine = item["source"]
    session = source.get("session")
    seen = [mine.get("session"), *(a.get("session") for a in mine.get("also", []))]
    if session is None or session in seen:
        return None
    also = [*mine.get("also", []), {"session": session, "run": source.get("run"), "thread": source.get("thread")}]
    return dict(mine, also=also[-ALSO_LIMIT:], repeats=int(mine.get("repeats", 0)) + 1)


def _queue(
    st: State,
    item_id: str,
    *,
    kind: str,
    title: str,
    text: str,
    source: dict[str, Any],
    flags: list[str],
    payload: dict[str, Any],
    announce: bool = True,
    tier: str = "",
) -> str:
    with st.store.lock, st.store.db.lock("queue"):  # one twin check at a time, across every worker
        twin = _twin(st, kind=kind, text=text, source=source, payload=payload)
        if twin is None:
            st.store.add_item(
                item_id, kind=kind, title=title, text=text, source=source, flags=flags, payload=payload, tier=tier
            )
        elif (widened := _also(twin, source)) is not None:
            st.store.set_source(twin["id"], widened)
    if twin is not None:
        logger.debug("%s repeats %s item %s; not queued again", kind, twin["status"], twin["id"])
        st.store.audit(
            "duplicate",
            {"item": twin["id"], "kind": kind, "status": twin["status"]},
            run_id=source.get("run"),
            session_id=source.get("session"),
        )
        return str(twin["id"])
    st.store.audit(
        "queued",
        {"item": item_id, "kind": kind, "text": text, "flags": flags, "tier": tier},
        run_id=source.get("run"),
        session_id=source.get("session"),
    )
    if announce:
        st.runtime.notify(
            "approval_requested",
            text=f"Waiting for approval ({item_id}): {title}{' [flagged: ' + ', '.join(flags) + ']' if flags else ''}"
            + (f" [tier: {tier}]" if tier else ""),
            item_id=item_id,
            title=title,
            flags=flags,
            tier=tier,
            workspace=source.get("workspace"),
            peer=source.get("peer"),
            thread=source.get("thread"),
        )
    return item_id


def _title(text: str) -> str:
    first = " ".join(text.split())
    return first if len(first) <= 80 else first[:77] + "..."


def pending_items(st: State) -> list[dict[str, Any]]:
    """The approvals-hook view of reflection's pending items, each naming the peer whose session proposed it."""
    return [
        {
            "id": i["id"],
            "kind": i["kind"],
            "title": i["title"],
            "body": i["text"],
            "workspace": i["source"].get("workspace"),
            "peer": i["source"].get("peer"),
            "source": i["source"],
            "flags": i["flags"],
            "tier": i.get("tier") or None,
            "created_at": i["created_at"],
            "plugin": "reflection",
        }
        for i in st.store.pending()
    ]


async def decide(
    st: State, item_id: str, decision: str, *, actor: str, reason: str, text: str | None
) -> dict[str, Any] | None:
    """Apply a decision to one of reflection's items; None when the id is not reflection's."""
    # Under the item's claim, settled only once applied: a worker killed in between leaves the item pending (the
    # claim lapses after the decision's deadline), and approving it again completes the apply without doubling it.
    if item_id.partition(":")[0] not in PREFIXES or st.store.item(item_id) is None:
        return None
    if decision not in ("approve", "edit", "reject"):
        raise ThothError(f"unknown decision {decision!r}; expected approve, edit or reject")
    lapse = st.runtime.background_deadline(NAME) + DECISION_MARGIN  # longer than the decision may run
    async with claimed(st.store, f"decision:{item_id}", seconds=lapse, wait=DECISION_WAIT) as mine:
        if not mine:
            raise ThothError(f"{item_id} is being decided by another worker; try again when it is done")
        item = st.store.item(item_id)
        if item is None or item["status"] != "pending":
            raise _already(st, item_id)
        return await _decide_claimed(st, item, decision, actor=actor, reason=reason, text=text)


async def _decide_claimed(
    st: State, item: dict[str, Any], decision: str, *, actor: str, reason: str, text: str | None
) -> dict[str, Any]:
    """The decision itself, once this worker holds the item's claim and has seen it pending."""
    item_id = item["id"]
    audit = {"item": item_id, "decision": decision, "reason": reason}
    where_from = {"run_id": item["source"].get("run"), "session_id": item["source"].get("session"), "actor": actor}
    if decision == "edit":
        if not text or not text.strip():
            raise ThothError(f"editing {item_id} needs the new text")
        _keep_proposed(st, item)
        if not st.store.edit(item_id, redactor_of(st).redact(text.strip())):
            raise _already(st, item_id)
        st.store.audit("decision", dict(audit, text=redactor_of(st).redact(text.strip())), **where_from)
        return {"id": item_id, "status": "pending", "message": f"edited {item_id}; approve it to apply"}
    if decision == "reject":
        if not st.store.settle(item_id, "rejected", actor=actor, reason=reason):
            raise _already(st, item_id)
        st.store.audit("decision", audit, **where_from)
        return {"id": item_id, "status": "rejected", "message": f"rejected {item_id}"}
    final = redactor_of(st).redact((text or item["text"]).strip())
    if normalized(final) != normalized(item["text"]):  # kept first: an apply done again applies this text
        _keep_proposed(st, item)
        st.store.edit(item_id, final)
    where = await _apply(st, item, final, actor)
    if not st.store.settle(item_id, "approved", actor=actor, reason=reason, text=final):
        raise _already(st, item_id)
    st.store.audit("decision", dict(audit, text=final, applied_to=where), **where_from)
    return {"id": item_id, "status": "approved", "message": f"approved {item_id}: {where}"}


def _already(st: State, item_id: str) -> ThothError:
    """The one-line refusal of a decision on an item decided already (by another worker, maybe)."""
    item = st.store.item(item_id)
    if item is None:
        return ThothError(f"{item_id} is no longer queued (forgotten meanwhile)")
    return ThothError(f"{item_id} was already {item['status']} by {item['decided_by']}")


def _keep_proposed(st: State, item: dict[str, Any]) -> None:
    """Remember the text as first proposed, so an edited item still stops its repeats."""
    if "proposed" not in item["source"]:
        st.store.set_source(item["id"], dict(item["source"], proposed=item["text"]))


async def _apply(st: State, item: dict[str, Any], text: str, actor: str) -> str:
    kind = item["kind"]
    if kind == "persona-observation":
        return _append_rule(st, text)
    if kind == "reflexion":
        path = reflexion_files.install(st.path(st.settings.reflexion_dir), item["payload"]["name"], text)
        st.store.set_source(item["id"], dict(item["source"], written=path.name))
        commit = git_commit(path, f"Approve reflexion record {path.name} (by {actor})")
        return f"{st.settings.reflexion_dir}/{path.name}" + (f" (committed {commit[:10]})" if commit else "")
    if kind == "guideline":
        folder = st.path(st.settings.reflexion_dir)
        record = reflexion_files.locate(folder, item["payload"]["reflexion"])
        if record is None:
            raise ThothError(f"{folder}: no reflexion record {item['payload']['reflexion']!r} to promote any more")
        where = _append_rule(st, text)
        reflexion_files.mark_promoted(record, day=utc_day(time.time()), to=where, actor=actor)
        return f"{where}; {st.settings.reflexion_dir}/{record.name} marked promoted"
    if kind == "memory-note":
        source = item["source"]
        owner = (source["peer"], source["workspace"]) if source.get("peer") and source.get("workspace") else None
        st.memory().append_notes([text], day=utc_day(time.time()), owner=owner)
        return str(st.settings.memory_file)
    if kind == RESTORE_KIND:  # back among the notes; the next nightly folds it into the snapshot, as approved
        source = item["source"]
        owner = (source["peer"], source["workspace"]) if source.get("peer") and source.get("workspace") else None
        st.memory().append_notes([text], day=item["payload"]["day"], owner=owner)
        return f"{st.settings.memory_file} (restored)"
    if kind == "user-model":
        return await _send_identity_update(st, item, text, actor)
    if kind == CORRECTION_KIND:
        return await _correct_record(st, item, text)
    if kind == "knowledge":
        topic = item["payload"]["topic"]
        with st.store.db.lock(f"file:{st.settings.knowledge_dir}/{topic}"):
            path = append_knowledge(
                st.path(st.settings.knowledge_dir),
                topic,
                text,
                heading=f"From {item['payload']['record']} (approved by {actor})",
            )
        return str(path.relative_to(st.path(".")) if path.is_relative_to(st.path(".")) else path)
    raise ThothError(f"cannot apply an item of kind {kind!r}")


def _append_rule(st: State, text: str) -> str:
    """Append one line (unless there) under the rules file's reflection heading; returns the file, project-relative."""
    path = st.path(st.settings.observations_file)
    line = f"- {' '.join(text.split())}"
    with st.store.db.lock(f"file:{st.settings.observations_file}"):  # two workers approving: neither line lost
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if line in current.splitlines():  # an apply a killed worker finished: not twice
            return str(st.settings.observations_file)
        if RULES_HEADING not in current:
            current = current.rstrip("\n") + ("\n\n" if current.strip() else "") + RULES_HEADING + "\n"
        write_atomic(path, current.rstrip("\n") + f"\n{line}\n")
    return str(st.settings.observations_file)


async def _send_identity_update(st: State, item: dict[str, Any], text: str, actor: str) -> str:
    """Pass one approved identity update to the layers, as a reflection result of its own."""
    source = item["source"]
    session = Session(
        source["workspace"],
        source["peer"],
        source["thread"],
        id=source["session"],
        home=st.runtime.home,
        runtime=st.runtime,
    )
    result = {
        "run_id": source.get("run") or "",
        "session_id": source["session"],
        "what_worked": [],
        "what_didnt": [],
        "skill": None,
        "memory_notes": [],
        "persona_observations": [],
        "next_check_at": None,
        "user_model_updates": {item["payload"]["peer"]: [text]},
        "flags": {},
        "approved_by": actor,
    }
    outcomes = await st.runtime.call("reflection_result", result=result, session=session)
    calls = [call for plugin, _, call in outcomes if st.runtime.layer_of(plugin) == "identity"]
    failed = [call for call in calls if call.status != "ok"]
    if failed:  # not applied: the item stays pending
        raise ThothError(f"{failed[0].plugin} could not take the update: {failed[0].error or failed[0].status}")
    return "identity layer" if calls else "no identity layer installed"


async def _correct_record(st: State, item: dict[str, Any], text: str) -> str:
    """Apply an approved correction to the record it names, as the layer's own `/correct` does."""
    source, record = item["source"], item["payload"]["record"]
    now = await st.runtime.edit_record(record_id=record, text=text, peer=source["peer"], workspace=source["workspace"])
    if now is None:  # not applied: the item stays pending, to reject
        raise ThothError(f"{source['peer']} has no record {record} to correct any more (forgotten or corrected)")
    return f"{now.get('layer', 'memory')} record {record} (now {now['id']})"


def approved_lines(st: State, items: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """(file, line) of each line in an approved file that holds an approved item's text.

    Persona rules and knowledge notes carry no owner tag, so forget lists them for a person to
    edit rather than rewriting files the humans approved. Files are named relative to the project.
    """
    found = []
    for item in items:
        if item["kind"] in ("persona-observation", "guideline"):
            relative = str(st.settings.observations_file)
        elif item["kind"] == "reflexion":
            name = item["source"].get("written") or item["payload"].get("name")
            relative = str(Path(st.settings.reflexion_dir) / str(name))
        elif item["kind"] == "knowledge":
            relative = str(Path(st.settings.knowledge_dir) / f"{item['payload'].get('topic')}.md")
        else:
            continue  # memory notes carry their owner's tag; identity updates live in the identity layer
        path = st.path(relative)
        wanted = {normalized(line.lstrip("- ")) for line in item["text"].splitlines() if line.strip()}
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        found += [(relative, n) for n, line in enumerate(lines, 1) if normalized(line.lstrip("- ")) in wanted]
    return sorted(set(found))
