"""A post-turn write replayed after a crash (the core's turn journal) stores a turn's messages once."""

from __future__ import annotations

from thoth_identity import plugin
from thoth_identity.migrations import MIGRATIONS
from thoth_identity.plugin import backend_for
from thoth_identity.store import IdentityStore

from thoth_core.journal import Entry
from thoth_core.storage import connect, migrate
from thoth_core.types import Reply, Turn

SAILING = (
    '{"observations": [{"content": "Ann sails a small boat on weekends", "kind": "explicit", "confidence": 0.9}],'
    ' "facts": [{"predicate": "hobby", "value": "sailing", "confidence": 0.95}]}'
)
RULES = [
    {"purpose": "derive", "match": "sail", "reply": SAILING},
    {"purpose": "derive", "reply": '{"observations": [], "facts": []}'},
    {"reply": "ok"},
]


def honcho_config(url):
    return {"plugins": {"identity": {"base_url": url, "workspace": "test", "write_timeout": 1.0, "write_retries": 0}}}


def stand_in(runtime, result):
    """The session the core's recovery gives a replayed turn: same id and start, only this turn."""
    return Entry(result.turn, result.reply, result.session.id, result.session.started_at, ["identity"]).session(runtime)


def derivations(runtime):
    return [r for r in runtime.model().requests if r.purpose == "derive"]


def messages(runtime):
    rows = backend_for(runtime).store.export_rows("default", "ann")["messages"]
    return [(m["turn_id"], m["role"], m["content"]) for m in rows]


def test_a_turns_message_of_a_role_is_stored_once(tmp_path):
    store = IdentityStore(tmp_path / "identity.db")
    common = {"thread": "t", "session_id": "s", "turn_id": "turn1"}
    first = store.add_message("w", "ann", role="user", content="I sail", **common)
    again = store.add_message("w", "ann", role="user", content="I sail", **common)
    reply = store.add_message("w", "ann", role="assistant", content="Nice", **common)
    other = store.add_message("w", "bob", role="user", content="I sail", **common)
    untracked = [
        store.add_message("w", "ann", thread="t", session_id="s", turn_id=None, role="user", content="x")
        for _ in range(2)
    ]
    assert again == first and len({first, reply, other, *untracked}) == 5
    assert store.counts("w", "ann")["messages"] == 4 and store.turn_message("w", "ann", "turn1", "user") == first
    store.close()


def test_copies_stored_before_the_unique_index_go_and_what_was_derived_follows_the_kept_one(tmp_path):
    path = tmp_path / "identity.db"
    db = connect(path)
    migrate(db, MIGRATIONS[:1])  # the release before one copy per turn
    for message_id in (1, 2):  # the second copy came from a replayed write
        db.execute(
            "INSERT INTO messages VALUES (?, 'w', 'ann', 't', 's', 'turn1', 'user', 'I sail every weekend', 1.0)",
            (message_id,),
        )
    db.execute(
        "INSERT INTO observations (workspace, peer, owner, content, kind, author, confidence, message_id, source,"
        " created_at) VALUES ('w', 'ann', 'o', 'Ann sails', 'explicit', 'deriver', 0.9, 2, 'message:2', 1.0)"
    )
    db.execute(
        "INSERT INTO facts (workspace, peer, subject, predicate, object, confidence, source, valid_from)"
        " VALUES ('w', 'ann', 'ann', 'hobby', 'sailing', 0.95, 'derived:message:2', 1.0)"
    )
    db.close()
    store = IdentityStore(path)
    assert [m["id"] for m in store.export_rows("w", "ann")["messages"]] == [1]
    assert [(o["message_id"], o["source"]) for o in store.recent_observations("w", "ann", limit=5)] == [
        (1, "message:1")
    ]
    assert store.derived_from("w", "ann", 1)
    assert store.delete("w", "ann", "t") == {"facts": 1, "observations": 1, "messages": 1, "cached_answers": 0}
    store.close()


async def test_the_embedded_backend_ingests_a_replayed_turn_once_without_deriving_again(make_runtime):
    runtime = make_runtime({"identity": plugin}, replies=RULES)
    result = await runtime.turn("I spent Saturday sailing my little boat again", peer="ann", thread="t1")
    await runtime.drain()
    before = backend_for(runtime).store.export_rows("default", "ann")
    for _ in range(2):
        await plugin.post_turn_write(turn=result.turn, reply=result.reply, session=stand_in(runtime, result))
    assert messages(runtime) == [
        (result.turn.id, "user", "I spent Saturday sailing my little boat again"),
        (result.turn.id, "assistant", "ok"),
    ]
    after = backend_for(runtime).store.export_rows("default", "ann")
    assert (after["observations"], after["facts"]) == (before["observations"], before["facts"])
    assert len(derivations(runtime)) == 1


async def test_recovery_through_the_runtime_keeps_one_copy_and_derives_what_the_kill_cut_short(make_runtime):
    first = make_runtime({"identity": plugin}, replies=RULES)
    written = await first.turn("I keep bees in my garden", peer="ann", thread="t")
    await first.drain()
    first.journal.append(written.turn, written.reply, written.session, ["identity"])  # killed before it was struck off
    # Another turn whose messages were stored when the process was killed, its derivation not yet done:
    cut = Turn("I spent Sunday sailing", "ann", "t", id="turn-cut")
    store, where = backend_for(first).store, {"thread": "t", "session_id": written.session.id, "turn_id": cut.id}
    for role, text in (("user", cut.text), ("assistant", "ok")):
        store.add_message("default", "ann", role=role, content=text, **where)
    first.journal.append(cut, Reply("ok"), written.session, ["identity"])
    await first.aclose()

    second = make_runtime({"identity": plugin}, replies=RULES)
    assert await second.recover() == 2
    await second.drain()
    assert second.journal.pending() == []
    assert [m[0] for m in messages(second)] == [written.turn.id, written.turn.id, cut.id, cut.id]
    assert [[m.content for m in r.messages] for r in derivations(second)] == [["I spent Sunday sailing"]]
    observations = backend_for(second).store.recent_observations("default", "ann", limit=10)
    assert "Ann sails a small boat on weekends" in {o["content"] for o in observations}


async def test_the_honcho_backend_sends_a_replayed_turn_once(make_runtime, honcho_server):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    result = await runtime.turn("I keep bees in my garden", peer="ann", thread="t")
    await runtime.drain()
    for _ in range(2):
        await plugin.post_turn_write(turn=result.turn, reply=result.reply, session=stand_in(runtime, result))
    assert [m["content"] for m in honcho_server.messages] == ["I keep bees in my garden", "ok"]


async def test_honcho_recovery_through_the_runtime_sends_only_what_never_reached_it(make_runtime, honcho_server):
    config = honcho_config(honcho_server.url)
    first = make_runtime({"identity": plugin}, config=config)
    sent = await first.turn("I keep bees in my garden", peer="ann", thread="t")
    await first.drain()
    first.journal.append(sent.turn, sent.reply, sent.session, ["identity"])  # Honcho had it; then the kill
    lost = Turn("and two hives now", "ann", "t", id="turn-lost")
    first.journal.append(lost, Reply("nice"), sent.session, ["identity"])  # killed before it was sent
    await first.aclose()

    second = make_runtime({"identity": plugin}, config=config)
    assert await second.recover() == 2
    await second.drain()
    assert second.journal.pending() == []
    contents = [m["content"] for m in honcho_server.messages]
    assert contents == ["I keep bees in my garden", "ok", "and two hives now", "nice"]
    await second.forget(peer="ann", thread="t")
    assert backend_for(second).store.sent("default", "ann", [sent.turn.id, lost.id]) == set()
