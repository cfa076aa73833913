"""Ids shown to people (`f12`, `o34`) are never given to another item, on either backend and in old files."""

from __future__ import annotations

import re
import sqlite3

from thoth_identity import plugin
from thoth_identity.migrations import MIGRATIONS
from thoth_identity.plugin import backend_for
from thoth_identity.store import IdentityStore

from thoth_core.config import Config
from thoth_core.storage import connect, migrate


async def say(runtime, text: str) -> str:
    return (await runtime.turn(text, peer="alice", thread="t")).reply.text


def listed(listing: str) -> dict[str, str]:
    """Item id -> its text, from `/correct`'s listing."""
    return dict(re.findall(r"^([fo]\d+)  (.+)$", listing, re.MULTILINE))


async def test_a_deleted_items_id_never_names_a_later_item(make_runtime, storage_config):
    runtime = make_runtime({"identity": plugin}, config=storage_config)
    await say(runtime, "/remember I am training for the Bergen marathon")
    await say(runtime, "/remember I keep bees on the roof")
    before = listed(await say(runtime, "/correct"))
    first, second = sorted((i for i in before if i.startswith("o")), key=lambda i: int(i[1:]))
    assert "Deleted" in await say(runtime, f"/correct {first} delete")
    assert "Corrected" in await say(runtime, f"/correct {second} I keep bees in the garden")
    after = listed(await say(runtime, "/correct"))
    [(new, text)] = [(i, t) for i, t in after.items() if i.startswith("o")]
    assert text == "I keep bees in the garden" and new not in before  # not `o1` again, nor `o2`
    assert "has no observation" in await say(runtime, f"/correct {first} delete")  # the stale id names nothing

    await say(runtime, "/remember my name is Alice")
    fact = next(i for i, t in listed(await say(runtime, "/correct")).items() if t == "name: Alice")
    await say(runtime, f"/correct {fact} delete")
    await say(runtime, "/remember my name is Alicia")
    again = next(i for i, t in listed(await say(runtime, "/correct")).items() if t == "name: Alicia")
    assert again != fact
    store = backend_for(runtime).store
    message = {"thread": "x", "session_id": "s", "role": "user"}
    deleted = store.add_message("default", "alice", turn_id="m", content="hello", **message)
    store.delete("default", "alice", "x")  # its id must not name a later message (facts derived from it cite it)
    assert store.add_message("default", "alice", turn_id="n", content="again", **message) != deleted


def test_a_file_from_before_keeps_its_ids_and_search_and_stops_reusing_them(tmp_path):
    path = tmp_path / "identity" / "identity.db"
    old = connect(path)
    migrate(old, MIGRATIONS[:4])  # the schema files had before ids were kept from reuse
    for n, text in enumerate(["likes rowing on the fjord", "keeps bees", "plays chess"], start=1):
        old.execute(
            "INSERT INTO observations (id, workspace, peer, owner, content, kind, author, confidence, source,"
            " created_at) VALUES (?, 'default', 'alice', ?, ?, 'explicit', 'alice', 1.0, 'test', ?)",
            (n * 10, _owner(), text, float(n)),
        )
    old.close()
    store = IdentityStore(path, Config(data={}))
    try:
        assert [o["id"] for o in store.recent_observations("default", "alice", limit=10)] == [30, 20, 10]
        [found] = store.search_observations("default", "alice", "rowing", limit=5)
        assert found["id"] == 10
        new = store.add_observation(
            "default", "alice", "plays go", kind="explicit", author="alice", confidence=1.0, source="test"
        )
        store.delete_observation("default", "alice", new)  # the largest id: a plain rowid hands it out again
        newer = store.add_observation(
            "default", "alice", "plays go well", kind="explicit", author="alice", confidence=1.0, source="test"
        )
        assert new > 30 and newer > new
        assert store.search_observations("default", "alice", "well", limit=5)[0]["id"] == newer
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check.close()


def _owner() -> str:
    from thoth_identity.store import owner_token

    return owner_token("default", "alice")
