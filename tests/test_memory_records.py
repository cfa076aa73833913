"""Memory records through the runtime, as a property: any sequence of remember / edit / delete leaves `records()`
showing exactly what a plain model of it holds, for each peer, and never a record of one peer to another.

The model is a dict per peer: single-valued facts (predicate -> value), a many-valued one (`likes`: a set) and
notes (a set of texts). Edits and deletes pick one of the owner's current records and are made either by the
owner (they must apply) or by a stranger (they must answer None / False and change nothing).
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

thoth_identity = pytest.importorskip("thoth_identity")
from thoth_identity import plugin as identity  # noqa: E402 - after the skip when the layer is not installed

from thoth_core.testing import make_test_runtime  # noqa: E402

PEERS = ("alice", "bob")
VALUES = ("tea", "coffee", "42", "ops")
NOTES = (
    "the ferns need water on friday",
    "ticket 12 waits for review",
    "buy milk and tulips",
    "the boiler service is due in march",
    "pack the tent for the trip",
)
CONFIG = {"plugins": {"identity": {"derive": False, "remember_timeout": 0, "synthesis": False}}}


@dataclass
class Held:
    """What one peer should have: the model."""

    single: dict[str, str] = field(default_factory=dict)  # predicate -> value
    likes: set[str] = field(default_factory=set)
    notes: set[str] = field(default_factory=set)

    def facts(self) -> set[str]:
        """The record texts of the current facts (`fact_label`)."""
        return {f"{p.replace('_', ' ')}: {v}" for p, v in self.single.items()} | {f"likes: {v}" for v in self.likes}


remember = st.tuples(
    st.just("remember"),
    st.sampled_from(PEERS),
    st.one_of(
        st.tuples(st.sampled_from(("shoe_size", "team")), st.sampled_from(VALUES)),
        st.tuples(st.just("likes"), st.sampled_from(VALUES)),
        st.tuples(st.just("note"), st.sampled_from(NOTES)),
    ),
)
change = st.tuples(
    st.sampled_from(("edit", "delete")),
    st.sampled_from(PEERS),  # whose record
    st.booleans(),  # by its owner (else by a stranger)
    st.integers(0, 5),  # which of the owner's records
    st.sampled_from(VALUES + NOTES),  # the new text of an edit
)
steps = st.lists(st.one_of(remember, change), min_size=1, max_size=12)


def remembered(text: tuple[str, str]) -> str:
    kind, value = text
    if kind == "note":
        return value
    if kind == "likes":
        return f"I like {value}"
    return f"my {kind.replace('_', ' ')} is {value}"


async def run(home: Path, plan: list[tuple[Any, ...]]) -> None:
    runtime = make_test_runtime(home, {"identity": identity}, config=CONFIG)
    model = {peer: Held() for peer in PEERS}
    try:
        for step in plan:
            if step[0] == "remember":
                _, peer, what = step
                await runtime.turn(f"/remember {remembered(what)}", peer=peer, thread="t")
                held, (kind, value) = model[peer], what
                if kind == "note":
                    held.notes.add(value)
                elif kind == "likes":
                    held.likes.add(value)
                else:
                    held.single[kind] = value
            else:
                await change_one(runtime, model, *step)
            await check(runtime, model)
        await check_no_leak(runtime)
    finally:
        await runtime.aclose()


async def change_one(
    runtime: Any, model: dict[str, Held], action: str, owner: str, by_owner: bool, pick: int, text: str
) -> None:
    mine = sorted(
        (r for r in await runtime.records(peer=owner, limit=500) if r["kind"] in ("fact", "note")),
        key=lambda r: r["id"],
    )
    if not mine:
        return
    record = mine[pick % len(mine)]
    actor = owner if by_owner else next(p for p in PEERS if p != owner)
    if action == "delete":
        done = await runtime.delete_record(record_id=record["id"], peer=actor)
        assert done is by_owner, (record, actor)
    else:
        now = await runtime.edit_record(record_id=record["id"], text=text, peer=actor)
        assert (now is not None) is by_owner, (record, actor, now)
    if not by_owner:
        return
    held = model[owner]
    if record["kind"] == "note":
        held.notes.discard(record["text"])
        if action == "edit":
            held.notes.add(text)
        return
    predicate, value = record["meta"]["predicate"], record["meta"]["value"]
    if predicate == "likes":
        held.likes.discard(value)
        if action == "edit":
            held.likes.add(text)
    elif action == "edit":
        held.single[predicate] = text
    else:
        del held.single[predicate]


async def check(runtime: Any, model: dict[str, Held]) -> None:
    for peer, held in model.items():
        records = await runtime.records(peer=peer, limit=500)
        facts = [r["text"] for r in records if r["kind"] == "fact"]
        notes = [r["text"] for r in records if r["kind"] == "note"]
        assert sorted(facts) == sorted(held.facts()), peer
        assert sorted(notes) == sorted(held.notes), peer
        assert not [r for r in records if r["kind"] == "observation"]
        assert [r["at"] for r in records] == sorted((r["at"] for r in records), reverse=True)


async def check_no_leak(runtime: Any) -> None:
    """No fact or note id of one peer is readable, editable or deletable by the other; their ids never overlap."""
    ids = {
        peer: {r["id"] for r in await runtime.records(peer=peer, limit=500) if r["kind"] != "entity"} for peer in PEERS
    }
    assert not ids["alice"] & ids["bob"]
    for owner, stranger in (PEERS, PEERS[::-1]):
        for record_id in ids[owner]:
            assert await runtime.get_record(record_id=record_id, peer=stranger) is None
            assert await runtime.get_record(record_id=record_id, peer=owner) is not None


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(plan=steps)
def test_records_match_a_model_of_remember_edit_delete_and_never_cross_peers(plan, tmp_path, thoth_env):
    asyncio.run(run(tmp_path / uuid.uuid4().hex, plan))
