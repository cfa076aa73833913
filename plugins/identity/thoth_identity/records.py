"""The identity layer's memory records: current facts (with their history), notes, observations and entities.

Ids are the ones `/correct` and `thoth identity show` use: `f<N>` a fact, `o<N>` an observation
(kind `note` when a person stated it: `/remember`, a correction; `observation` when it was
derived or noted from a reaction), and `e:<name>` an entity (a subject of current facts, the peer
included), whose `meta["links"]` are its facts as edges: the inspector's graph. Editing and
deleting go through `corrections.correct_item`, so they do exactly what `/correct` does (audited,
erased from the file); entities are read-only. Every read is scoped to (workspace, peer): another
peer's id is None.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from thoth_core import MemoryRecord, ThothError, hookimpl

from .corrections import ITEM, correct_item
from .layer import backend_async
from .render import fact_label
from .store import IdentityStore

if TYPE_CHECKING:
    from thoth_core import Runtime

LAYER = "identity"
ENTITY = "e:"
ACTOR = "records"  # who the audit line names: a person through the HTTP API or the inspector
KINDS = ("fact", "note", "observation", "entity")


def fact_record(fact: dict[str, Any], peer: str) -> MemoryRecord:
    """A fact row as a record: `predicate: value` (or `Subject, predicate: value`), editable while current."""
    meta = {k: fact[k] for k in ("subject", "predicate", "confidence", "source", "valid_from", "valid_to")}
    return {
        "layer": LAYER,
        "kind": "fact",
        "id": f"f{fact['id']}",
        "text": fact_label(fact, peer),
        "at": float(fact["valid_from"]),
        "editable": fact["valid_to"] is None,
        "meta": {**meta, "value": fact["object"]},
    }


def observation_record(row: dict[str, Any]) -> MemoryRecord:
    """An observation row as a record: a `note` when a person stated it, else an `observation`."""
    return {
        "layer": LAYER,
        "kind": "note" if row["kind"] == "explicit" else "observation",
        "id": f"o{row['id']}",
        "text": row["content"],
        "at": float(row["created_at"]),
        "editable": True,
        "meta": {k: row[k] for k in ("kind", "author", "confidence", "source")},
    }


def entity_records(facts: list[dict[str, Any]], peer: str) -> list[MemoryRecord]:
    """Each subject of the current facts (the peer first) with its facts as links, newest first."""
    subjects = {f["subject"] for f in facts}
    records: list[MemoryRecord] = []
    for subject in dict.fromkeys([peer, *sorted(subjects)]):
        own = [f for f in facts if f["subject"] == subject]
        pointing = [f for f in facts if f["object"] == subject and f["subject"] != subject]
        if not own and not pointing:
            continue
        links = [
            {"fact": f"f{f['id']}", "predicate": f["predicate"], "to": f["object"], "entity": f["object"] in subjects}
            for f in own
        ]
        records.append(
            {
                "layer": LAYER,
                "kind": "entity",
                "id": f"{ENTITY}{subject}",
                "text": subject,
                "at": max(float(f["valid_from"]) for f in own or pointing),
                "editable": False,
                "meta": {"self": subject == peer, "links": links, "from": [f"f{f['id']}" for f in pointing]},
            }
        )
    return records


def list_records(
    store: IdentityStore, workspace: str, peer: str, *, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord]:
    """The peer's records of one kind (None: all), newest first, at most `limit`, older than `before`."""
    if kind is not None and kind not in KINDS:
        return []
    found: list[MemoryRecord] = []
    if kind in (None, "fact", "entity"):
        facts = store.current_facts(workspace, peer)
        if kind in (None, "fact"):
            found += [fact_record(f, peer) for f in facts]
        if kind in (None, "entity"):
            found += entity_records(facts, peer)
    if kind in (None, "note", "observation"):
        explicit = None if kind is None else kind == "note"
        rows = store.observations_before(workspace, peer, before=before, limit=limit, explicit=explicit)
        found += [observation_record(row) for row in rows]
    found = [r for r in found if before is None or r["at"] < before]
    found.sort(key=lambda r: r["at"], reverse=True)
    return found[:limit]


def one_record(store: IdentityStore, workspace: str, peer: str, record_id: str) -> MemoryRecord | None:
    """One of the peer's records by id (a fact with its earlier values, newest first), or None."""
    if record_id.startswith(ENTITY):
        name = record_id[len(ENTITY) :]
        return next((r for r in entity_records(store.current_facts(workspace, peer), peer) if r["text"] == name), None)
    match = ITEM.match(record_id)
    if match is None:
        return None
    row_id = int(match.group(2))
    if match.group(1) == "o":
        row = store.observation(workspace, peer, row_id)
        return None if row is None else {**observation_record(row), "history": []}
    every = store.fact_history(workspace, peer)
    fact = next((f for f in every if f["id"] == row_id), None)
    if fact is None:
        return None
    earlier = [
        f
        for f in every
        if (f["subject"], f["predicate"]) == (fact["subject"], fact["predicate"])
        and f["id"] != row_id
        and f["valid_to"] is not None
        and f["valid_to"] <= fact["valid_from"]
    ]
    earlier.sort(key=lambda f: (f["valid_from"], f["id"]), reverse=True)
    return {**fact_record(fact, peer), "history": [fact_record(f, peer) for f in earlier]}


def change_record(
    store: IdentityStore, runtime: Runtime, workspace: str, peer: str, record_id: str, text: str | None
) -> tuple[bool, MemoryRecord | None]:
    """Edit (`text`) or delete (None) one of the peer's facts or observations as `/correct` does.

    Returns (whether it was done, the record as it now stands); not done for an id that is not the peer's.
    """
    if ITEM.match(record_id) is None:
        return False, None
    try:
        _message, now = correct_item(
            store, runtime, workspace=workspace, peer=peer, item=record_id, text=text, actor=ACTOR
        )
    except ThothError:  # no such item of this peer (or text /correct refuses): nothing changed
        return False, None
    return True, None if now is None else one_record(store, workspace, peer, now)


@hookimpl
async def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord]:
    store = (await backend_async(runtime)).store
    return await asyncio.to_thread(list_records, store, workspace, peer, kind=kind, limit=limit, before=before)


@hookimpl
async def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    store = (await backend_async(runtime)).store
    return await asyncio.to_thread(one_record, store, workspace, peer, record_id)


@hookimpl
async def edit_memory_record(
    record_id: str, text: str, peer: str, workspace: str, runtime: Runtime
) -> MemoryRecord | None:
    store = (await backend_async(runtime)).store
    done, record = await asyncio.to_thread(change_record, store, runtime, workspace, peer, record_id, text)
    return record if done else None


@hookimpl
async def delete_memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> bool | None:
    store = (await backend_async(runtime)).store
    done, _ = await asyncio.to_thread(change_record, store, runtime, workspace, peer, record_id, None)
    return True if done else None
