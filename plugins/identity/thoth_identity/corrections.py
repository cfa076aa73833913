"""Corrections a person makes to what the identity layer holds about them: edit or delete one item, audited.

Items are named `f<id>` (a current fact) or `o<id>` (an observation), as `thoth identity show` and
`/correct` list them. Editing a fact supersedes it (its history is kept); editing an observation
replaces it; deleting removes the row and erases it from the file (FTS segments and WAL
included). Each correction appends one line to `identity/corrections.jsonl` (with a shared store,
one row to its `corrections` table): when, who, whose item, what was done; never the text, so a
deleted item leaves nothing behind.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import ThothError
from thoth_core.redact import redactor_of

from .render import fact_label
from .store import IdentityStore

if TYPE_CHECKING:
    from thoth_core import Runtime

ITEM = re.compile(r"^([fo])(\d+)$")
LISTED = 50


def held_items(store: IdentityStore, workspace: str, peer: str) -> list[dict[str, Any]]:
    """What is held about a peer, each with the id a correction names: current facts, then observations."""
    facts = [
        {"id": f"f{f['id']}", "kind": "fact", "text": fact_label(f, peer)} for f in store.current_facts(workspace, peer)
    ]
    notes = [
        {"id": f"o{o['id']}", "kind": "observation", "text": o["content"]}
        for o in store.recent_observations(workspace, peer, limit=LISTED)
    ]
    return facts + notes


def correct(
    store: IdentityStore, runtime: Runtime, *, workspace: str, peer: str, item: str, text: str | None, actor: str
) -> str:
    """Edit (`text`) or delete (`text` None) one of the peer's items; returns what was done, in one line."""
    return correct_item(store, runtime, workspace=workspace, peer=peer, item=item, text=text, actor=actor)[0]


def correct_item(
    store: IdentityStore, runtime: Runtime, *, workspace: str, peer: str, item: str, text: str | None, actor: str
) -> tuple[str, str | None]:
    """`correct`, also giving the id of the item as it now stands (None after a delete)."""
    match = ITEM.match(item.strip())
    if match is None:
        raise ThothError(f"{item!r} is not an item id; `thoth identity show` and `/correct` list them (f12, o34)")
    kind, row_id = match.group(1), int(match.group(2))
    if text is not None:
        text = text.strip()
        if not text:
            raise ThothError("the corrected text is empty; to delete the item, say delete")
        found = redactor_of(runtime).find_secrets(text)
        if found:
            raise ThothError(f"not stored: that holds a secret ({', '.join(found)}); secrets are never kept in memory")
    message, now = (_fact if kind == "f" else _observation)(store, workspace, peer, row_id, text, actor)
    store.scrub()  # the old text leaves the file (or PostgreSQL's dead rows), not only the table
    _audit(store, runtime, workspace=workspace, peer=peer, actor=actor, action="edit" if text else "delete", item=item)
    return message, now


def _fact(
    store: IdentityStore, workspace: str, peer: str, row_id: int, text: str | None, actor: str
) -> tuple[str, str | None]:
    fact = store.current_fact(workspace, peer, row_id)
    if fact is None:
        raise ThothError(f"{peer} has no current fact f{row_id}")
    label = fact["predicate"].replace("_", " ")
    if text is None:
        store.delete_fact(workspace, peer, row_id)
        return f"Deleted {peer}'s fact f{row_id} ({label}).", None
    outcome = store.set_fact(
        workspace,
        peer,
        fact["predicate"],
        text,
        confidence=1.0,
        source=f"correction:{actor}",
        subject=fact["subject"],
        replaces=row_id,  # another value of a many-valued predicate (`likes`) stays
    )
    whose = fact["subject"]  # the peer, or the entity the fact is about
    return f"Corrected {whose}'s {label}: {text} (the old value stays in its history).", f"f{outcome['fact']['id']}"


def _observation(
    store: IdentityStore, workspace: str, peer: str, row_id: int, text: str | None, actor: str
) -> tuple[str, str | None]:
    if not store.delete_observation(workspace, peer, row_id):
        raise ThothError(f"{peer} has no observation o{row_id}")
    if text is None:
        return f"Deleted {peer}'s observation o{row_id}.", None
    new = store.add_observation(
        workspace, peer, text, kind="explicit", author=actor, confidence=1.0, source="correction"
    )
    held = new if new is not None else store.observation_id(workspace, peer, text)  # the same text was held already
    return f"Corrected {peer}'s observation o{row_id}: {text}", None if held is None else f"o{held}"


def _audit(store: IdentityStore, runtime: Runtime, **entry: Any) -> None:
    """One line in the home's audit file; with a shared store, one row of its `corrections` table (every worker's)."""
    if store.db.dialect == "postgres":
        store.db.execute(
            "INSERT INTO corrections (at, workspace, peer, actor, action, item) VALUES (?, ?, ?, ?, ?, ?)",
            (time.time(), entry["workspace"], entry["peer"], entry["actor"], entry["action"], entry["item"]),
        )
        return
    path = Path(runtime.home) / "identity" / "corrections.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as audit:
        audit.write(json.dumps({"at": time.time(), **entry}) + "\n")
