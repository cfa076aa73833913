"""Several workers on one store: the inbox (both dialects), bridges sharing a PostgreSQL, a dead worker's thread."""

from __future__ import annotations

import json
import threading
import time

import pytest
from thoth_slack.cards import APPROVE, REJECT
from thoth_slack.drain import ThreadDrain
from thoth_slack.inbox import DONE, FAILED, MAX_ATTEMPTS, RETRY_FIRST_SECONDS, Inbox, Pending, digest
from thoth_slack.outbound import Ledger
from thoth_slack.testing import button_press, event_body, mention, signed

from thoth_core import hookimpl
from thoth_core.config import Config


@pytest.fixture
def store(storage_config, tmp_path):
    """The ledger's store in each dialect (the kit's `storage_config`)."""
    ledger = Ledger(tmp_path / "ledger.db", config=Config(data=storage_config))
    assert ledger.db is not None and ledger.db.dialect == ("postgres" if storage_config else "sqlite")
    _past_restart(ledger.db, 10)
    yield ledger
    ledger.close()


def _past_restart(db, claim_seconds: float) -> None:
    """Wait until no claim is kept by the server's (re)start's grace (a test server may have just started)."""
    if db.dialect == "postgres":
        time.sleep(max(0.0, claim_seconds + 0.2 - db.uptime()))


def _pending(n: int, thread: str = "CGENERAL:1.1", peer: str = "UANN") -> Pending:
    return Pending(digest(f"event Ev{n}"), "T1", peer, "CGENERAL", "1.1", f"message {n}", thread)


def test_a_delivery_is_recorded_once_and_needs_answering_until_finished(store):
    inbox = Inbox(store.db, 10)
    assert inbox.receive(_pending(1), "1.2")
    assert inbox.receive(_pending(1), "1.2")  # a retry while still pending: still to be answered (once)
    assert inbox.claim("CGENERAL:1.1")
    first = inbox.next("CGENERAL:1.1")
    assert first is not None and first.text == "message 1" and first.attempts == 0
    inbox.finish(first.key, "turn-1")
    assert not inbox.receive(_pending(1), "1.2")  # answered: a later redelivery adds nothing
    assert inbox.next("CGENERAL:1.1") is None
    [(state, text, turn)] = store.db.execute("SELECT state, text, turn_id FROM inbox").fetchall()
    assert (state, text, turn) == (DONE, "", "turn-1")  # the text goes once answered


def test_pending_messages_come_oldest_first_and_a_hopeless_one_is_given_up(store):
    inbox = Inbox(store.db, 10)
    inbox.receive(_pending(3), "1.30")
    inbox.receive(_pending(1), "1.10")
    inbox.receive(_pending(2), "1.20")
    assert inbox.claim("CGENERAL:1.1")  # only the thread's holder takes its messages
    assert [inbox.next("CGENERAL:1.1").text for _ in range(1)] == ["message 1"]
    for _ in range(MAX_ATTEMPTS - 1):
        assert inbox.next("CGENERAL:1.1").text == "message 1"  # never finished: each start counts
    assert inbox.next("CGENERAL:1.1").text == "message 2"
    states = dict(store.db.execute("SELECT text, state FROM inbox").fetchall())
    assert states["message 2"] == "pending" and FAILED in states.values()


def test_one_worker_holds_a_thread_until_it_lets_go_or_stops_renewing(store):
    one, other = Inbox(store.db, 10, owner="one"), Inbox(store.db, 10, owner="other")
    now = time.time()
    one.receive(_pending(1), "1.2", now=now)
    assert one.claim("CGENERAL:1.1", now=now) and one.claim("CGENERAL:1.1", now=now)  # its own again
    assert not other.claim("CGENERAL:1.1", now=now + 5)
    assert one.orphans(now=now + 5) == []
    one.renew(now=now + 8)
    assert not other.claim("CGENERAL:1.1", now=now + 15)  # renewed until now + 18
    assert other.orphans(now=now + 19) == ["CGENERAL:1.1"]  # one stopped renewing: it died
    assert other.claim("CGENERAL:1.1", now=now + 19)
    one.release("CGENERAL:1.1")  # a late release by the old holder does not free the new one's claim
    assert not one.claim("CGENERAL:1.1", now=now + 20)
    other.release("CGENERAL:1.1")
    assert one.claim("CGENERAL:1.1", now=now + 20)


def test_joined_threads_and_forget_are_shared(store):
    inbox, elsewhere = Inbox(store.db, 10), Inbox(store.db, 10)
    inbox.join("CGENERAL:1.1")
    assert elsewhere.joined("CGENERAL:1.1") and not elsewhere.joined("CGENERAL:9.9")
    inbox.receive(_pending(1), "1.2")
    inbox.receive(_pending(2, peer="UBOB"), "1.3")
    assert store.forget("T1", "UANN") == 1
    assert [row[0] for row in store.db.execute("SELECT peer FROM inbox").fetchall()] == ["UBOB"]


def test_a_holder_whose_claim_lapsed_and_was_taken_over_cannot_take_or_finish_its_messages(store):
    slow, other = Inbox(store.db, 10, owner="slow"), Inbox(store.db, 10, owner="other")
    slow.receive(_pending(1), "1.2")
    slow.receive(_pending(2), "1.3")
    assert slow.claim("CGENERAL:1.1", now=time.time() - 30)  # its renewals stalled: lapsed 20 s ago
    first = slow.next("CGENERAL:1.1")
    assert first is not None and first.text == "message 1"
    assert other.claim("CGENERAL:1.1")  # the sweep of another worker takes the thread over
    again = other.next("CGENERAL:1.1")
    assert again is not None and again.key == first.key  # the new holder answers it (into the same placeholder)
    assert not slow.placed(first.key, "1700000001.000001")
    assert not slow.finish(first.key, "turn-slow")  # the late answer does not count ...
    assert not slow.claim("CGENERAL:1.1") and slow.next("CGENERAL:1.1") is None  # ... nor does it go on
    assert other.finish(again.key, "turn-other")
    assert not slow.finish(first.key, "turn-slow")
    [(state, turn, reply)] = store.db.execute("SELECT state, turn_id, reply_ts FROM inbox WHERE key = ?", (first.key,))
    assert (state, turn, reply) == (DONE, "turn-other", None)
    assert other.next("CGENERAL:1.1").text == "message 2"


def test_a_drain_that_lost_its_claim_mid_answer_stops_and_the_thread_is_answered_once_in_order(store):
    import asyncio

    slow, other = Inbox(store.db, 0.5, owner="slow"), Inbox(store.db, 10, owner="other")
    for n in (1, 2, 3):
        slow.receive(_pending(n), f"1.{n + 1}")
    answered, counted = [], []
    other_started, slow_finished = asyncio.Event(), asyncio.Event()

    def answering(inbox, name):
        async def answer(pending):
            answered.append((name, pending.text))
            if name == "slow":  # a stalled turn, its claim not renewed (no renewer here): it lapses, is taken over
                await asyncio.wait_for(other_started.wait(), 30)
            else:
                other_started.set()
                await asyncio.wait_for(slow_finished.wait(), 30)  # the late answer comes in meanwhile
            if await asyncio.to_thread(inbox.finish, pending.key, f"turn-{name}"):
                counted.append((name, pending.text))
            if name == "slow":
                slow_finished.set()

        return answer

    async def scenario():
        drains = [ThreadDrain(inbox, answering(inbox, inbox.owner), asyncio.ensure_future) for inbox in (slow, other)]
        first = asyncio.ensure_future(drains[0].drain("CGENERAL:1.1"))
        deadline = time.monotonic() + 20
        while not (answered and await asyncio.to_thread(other.orphans)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the sweep of the other worker finds the thread without a live holder
        await asyncio.wait_for(asyncio.gather(first, drains[1].drain("CGENERAL:1.1")), 30)

    asyncio.run(scenario())
    assert answered == [("slow", "message 1"), ("other", "message 1"), ("other", "message 2"), ("other", "message 3")]
    assert counted == [("other", "message 1"), ("other", "message 2"), ("other", "message 3")]
    turns = store.db.execute("SELECT turn_id FROM inbox ORDER BY sent").fetchall()
    assert [row[0] for row in turns] == ["turn-other"] * 3


def test_claims_being_drained_are_renewed_by_a_thread_while_the_loop_is_blocked(store):
    import asyncio

    holder, other = Inbox(store.db, 1, owner="holder"), Inbox(store.db, 10, owner="other")
    holder.receive(_pending(1), "1.2")
    assert holder.claim("CGENERAL:9.9")  # a claim whose release failed: not drained, so not renewed
    taken = []

    async def answer(pending):
        time.sleep(2.5)  # a turn blocking the event loop, past its 1 s claim
        taken.extend([other.claim(pending.thread), other.claim("CGENERAL:9.9")])
        holder.finish(pending.key, "turn-1")

    drain = ThreadDrain(holder, answer, asyncio.ensure_future)
    drain.start_renewing()
    try:
        asyncio.run(drain.drain("CGENERAL:1.1"))
    finally:
        drain.stop_renewing()
    assert taken == [False, True]
    assert store.db.execute("SELECT state FROM inbox").fetchone()[0] == DONE


def test_claims_are_judged_by_the_databases_clock_not_a_skewed_host(store, monkeypatch):
    import types

    import thoth_slack.inbox

    steady, fast = Inbox(store.db, 10, owner="steady"), Inbox(store.db, 10, owner="fast")
    steady.receive(_pending(1), "1.2")
    assert steady.claim("CGENERAL:1.1")
    skewed = types.SimpleNamespace(time=lambda: time.time() + 3600)  # this host's clock runs an hour ahead
    monkeypatch.setattr(thoth_slack.inbox, "time", skewed)
    assert not fast.claim("CGENERAL:1.1")  # the live claim is not taken for expired
    assert fast.orphans() == []
    assert fast.claim("CGENERAL:2.2")
    [(expires,)] = store.db.execute("SELECT expires FROM claims WHERE owner = 'fast'").fetchall()
    assert abs(expires - (time.time() + 10)) < 5  # the claim's expiry is the database's time, not the skewed one
    assert fast.orphans(now=expires + 1) == ["CGENERAL:1.1"]  # (an explicit time still rules, as tests use)


def test_a_failed_try_waits_longer_each_time_and_only_a_crash_uses_up_an_attempt(store):
    inbox = Inbox(store.db, 10)
    inbox.receive(_pending(1), "1.2")
    inbox.receive(_pending(2), "1.3")
    assert inbox.claim("CGENERAL:1.1")
    now = time.time()
    for failures in range(4):
        pending = inbox.next("CGENERAL:1.1", now=now)
        assert pending is not None and pending.text == "message 1" and pending.failures == failures
        inbox.retry_later(pending, counted=False, now=now)  # e.g. Slack down: the attempt is given back
        wait = RETRY_FIRST_SECONDS * 2**failures
        assert inbox.next("CGENERAL:1.1", now=now + wait - 0.1) is None  # message 2 waits behind it, in order
        assert not inbox.ready("CGENERAL:1.1", now=now + wait - 0.1)
        assert inbox.orphans(now=now + wait - 0.1) == [] and inbox.orphans(now=now + wait + 11) == ["CGENERAL:1.1"]
        now += wait
    [(attempts, failures)] = store.db.execute("SELECT attempts, failures FROM inbox WHERE text = 'message 1'")
    assert (attempts, failures) == (0, 4)
    pending = inbox.next("CGENERAL:1.1", now=now)
    inbox.retry_later(pending, counted=True, now=now)  # an unexpected error: counted as a start
    assert store.db.execute("SELECT attempts FROM inbox WHERE key = ?", (pending.key,)).fetchone()[0] == 1


def test_an_answer_failing_with_a_slack_error_keeps_its_attempts_and_is_retried_with_a_growing_wait(make_slack):
    from thoth_slack.testing import dm

    slack = make_slack(slack={"claim_seconds": 1}, replies=[{"reply": "back again"}])
    slack.fake.errors["chat.postMessage"] = "internal_error"  # Slack down: the placeholder cannot be posted
    slack.send(dm("are you there?"))
    time.sleep(3.5)  # the sweep runs every 0.2 s: without a growing wait that would be ~15 tries
    tries = slack.fake.refused.count("chat.postMessage")
    [(state, attempts, failures)] = slack.bridge.inbox.db.execute("SELECT state, attempts, failures FROM inbox")
    assert 2 <= tries <= 4 and (state, attempts, failures) == ("pending", 0, tries)
    del slack.fake.errors["chat.postMessage"]
    slack.fake.wait_for("chat.update", lambda p: p["text"] == "back again", timeout=20)
    slack.bridge.loop.join()
    assert slack.replies("DANN") == ["back again"]
    assert slack.bridge.inbox.db.execute("SELECT state FROM inbox").fetchone()[0] == DONE


def test_forget_drops_the_texts_a_worker_holds_as_received(make_slack):
    from thoth_slack.testing import dm

    slack = make_slack(slack={"claim_seconds": 1})
    busy = Inbox(slack.bridge.inbox.db, 60, owner="busy-worker")
    assert busy.claim("DANN")  # another worker holds the DM: the message waits, its raw text held here
    slack.send(dm("my number is 555-0100"))
    [(key,)] = slack.bridge.inbox.db.execute("SELECT key FROM inbox").fetchall()
    waiting = Pending(key, "T1", "UANN", "DANN", None, "", "DANN")
    assert slack.bridge.drain.text_of(waiting) == "my number is 555-0100"
    receipt = slack.call(slack.runtime.forget(peer="UANN", workspace="T1"))
    assert receipt["slack"] == {"ledger entries": 1}
    assert slack.bridge.drain.text_of(waiting) == ""
    assert slack.bridge.inbox.db.execute("SELECT count(*) FROM inbox").fetchone()[0] == 0


def _shared(make_slack, storage_url, config=None, **kwargs):
    slack = make_slack(config={"storage": {"url": storage_url}, **(config or {})}, slack={"claim_seconds": 1}, **kwargs)
    _past_restart(slack.bridge.inbox.db, 1)
    return slack


def test_two_bridges_on_one_postgresql_answer_a_thread_in_order_once(make_slack, storage_url):
    replies = [{"match": f"q{i}\\b", "reply": f"a{i}"} for i in range(8)]
    workers = [_shared(make_slack, storage_url, replies=replies) for _ in range(2)]
    root = "1700000000.000100"
    bodies = [json.dumps(event_body(mention("q0", ts=root)))]
    for i in range(1, 8):
        follow = {"type": "message", "channel_type": "channel", "user": "UANN", "text": f"q{i}", "channel": "CGENERAL"}
        bodies.append(json.dumps(event_body({**follow, "ts": f"1700000000.{(i + 1) * 100:06d}", "thread_ts": root})))
    for body in bodies:  # every delivery reaches both workers at once; the next is sent once both acked
        pair = [threading.Thread(target=w.dispatch, args=(signed(body),), kwargs={"wait": False}) for w in workers]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join(30)
    for worker in workers:
        worker.bridge.loop.join()
    deadline = time.monotonic() + 30
    while len(workers[0].replies("CGENERAL", root)) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert workers[0].replies("CGENERAL", root) == [f"a{i}" for i in range(8)]


def test_a_dead_workers_thread_is_taken_over_and_its_placeholder_updated(make_slack, storage_url):
    slack = _shared(make_slack, storage_url, replies=[{"reply": "answered after all"}])
    dead = Inbox(slack.bridge.inbox.db, 1, owner="dead-worker")
    pending = Pending(digest("event EvDEAD"), "T1", "UANN", "CGENERAL", "1.1", "hello?", "CGENERAL:1.1")
    with dead.db.transaction():  # what the dead worker left, seen by the live one's sweep all at once
        dead.receive(pending, "1.2", now=time.time() - 5)
        dead.claim("CGENERAL:1.1", now=time.time() - 5)  # expired: it stopped renewing 4 s ago
        dead.placed(pending.key, "1700000099.000001")  # it had posted its placeholder, then died
    update = slack.fake.wait_for("chat.update", lambda p: p["text"] == "answered after all", timeout=20)
    slack.bridge.loop.join()
    assert update["ts"] == "1700000099.000001"
    assert slack.fake.calls_to("chat.postMessage") == []  # no second reply
    row = slack.bridge.inbox.db.execute("SELECT state, turn_id FROM inbox").fetchone()
    assert row[0] == DONE and row[1]


class FixedEmbedder:
    """Vectors that depend only on a text's length: episodes without the model."""

    name, dim = "fixed", 384

    @hookimpl
    def register_embedders(self, register):
        register("fixed", lambda runtime, options: self)

    def embed(self, texts):
        import numpy as np

        vectors = np.stack([np.random.default_rng(len(t)).standard_normal(self.dim) for t in texts])
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def test_a_dead_workers_message_cut_short_mid_stream_is_remembered_whole_once_after_its_re_run(
    make_slack, storage_url, tmp_path
):
    from thoth_episodic import plugin as episodic
    from thoth_episodic.memory import memory_for
    from thoth_identity import plugin as identity
    from thoth_identity.plugin import backend_for
    from thoth_working import plugin as working

    from thoth_core.journal import TurnJournal
    from thoth_core.types import CUT_SHORT, Reply, Session, Turn

    whole = "Hello Ann, here is the whole answer."
    pending = Pending(digest("event EvCUT"), "T1", "UANN", "CGENERAL", "1.1", "hello?", "CGENERAL:1.1")
    turn_id = f"slack-{pending.key[:32]}"  # the bridge's turn id for this message, on whichever worker
    # The dead worker had shown "Hello Ann," when it died: its journal row holds the turn cut short.
    journal = TurnJournal(tmp_path / "dead-journal.db", Config(data={"storage": {"url": storage_url}}))
    journal.append(
        Turn("hello?", "UANN", "CGENERAL:1.1", workspace="T1", id=turn_id),
        Reply.cut("Hello Ann,"),
        Session("T1", "UANN", "CGENERAL:1.1"),
        ["working", "episodic", "identity"],
    )
    journal.close()
    layers = {"working": working, "episodic": episodic, "identity": identity, "fixed": FixedEmbedder()}
    config = {"plugins": {"episodic": {"embedder": "fixed"}, "identity": {"derive": False}}}
    slack = _shared(make_slack, storage_url, plugins=layers, config=config, replies=[{"reply": whole}])
    dead = Inbox(slack.bridge.inbox.db, 1, owner="dead-worker")
    with dead.db.transaction():
        dead.receive(pending, "1.2", now=time.time() - 5)
        dead.claim("CGENERAL:1.1", now=time.time() - 5)
        dead.placed(pending.key, "1700000099.000001")
    slack.fake.wait_for("chat.update", lambda p: p["text"] == whole, timeout=30)
    slack.bridge.loop.join()
    slack.call(slack.runtime.drain())
    assert slack.bridge.inbox.db.execute("SELECT turn_id FROM inbox").fetchone()[0] == turn_id

    episodes = [e for e in memory_for(slack.runtime).store.episodes() if e.turn_id == turn_id]
    assert [(e.user, e.assistant) for e in episodes] == [("hello?", whole)]
    replayed = memory_for(slack.runtime).store.get(episodes[0].id, as_of=episodes[0].recorded_at - 1e-3)
    assert replayed is not None and replayed.assistant == f"Hello Ann,\n{CUT_SHORT}"  # the recovery wrote it first
    rows = backend_for(slack.runtime).store.export_rows("T1", "UANN")["messages"]
    assert [(m["role"], m["content"]) for m in rows if m["turn_id"] == turn_id] == [
        ("user", "hello?"),
        ("assistant", whole),
    ]
    store = working.state(slack.runtime).store
    entries = [
        (e["user"], e["assistant"], e.get("cut_short"))
        for row in store.every()
        for e in store.entries(row.session_id, row.started_at)
        if e.get("type") == "turn" and e.get("turn_id") == turn_id
    ]
    assert entries == [("hello?", whole, None)]
    assert not any(CUT_SHORT in m.content for m in slack.runtime.model().requests[-1].messages)


class SharedQueue:
    """A toy approval queue in the shared store whose first decision wins, as the reflection queue's does."""

    def __init__(self, runtime_config):
        from thoth_core.database import open_database

        sql = "CREATE TABLE items (id TEXT PRIMARY KEY, status TEXT NOT NULL, actor TEXT)"
        self.db = open_database(runtime_config, "toy_queue", path=None, migrations=[sql], postgres=[sql])
        self.db.execute("INSERT INTO items VALUES ('skill:x', 'pending', NULL) ON CONFLICT (id) DO NOTHING")

    @hookimpl
    def approvals(self):
        rows = self.db.execute("SELECT id FROM items WHERE status = 'pending'").fetchall()
        return [
            {"id": row[0], "kind": "skill", "title": row[0], "body": "", "workspace": None, "peer": None}
            for row in rows
        ]

    @hookimpl
    def decide(self, item_id, decision, actor):
        from thoth_core import ThothError

        won = self.db.execute(
            "UPDATE items SET status = ?, actor = ? WHERE id = ? AND status = 'pending' RETURNING id",
            (decision, actor, item_id),
        ).fetchone()
        if won is None:
            raise ThothError(f"{item_id} was already decided")
        return {"message": f"{decision}d"}


def test_a_card_clicked_on_two_workers_at_once_is_decided_once(make_slack, storage_url):
    config = Config(data={"storage": {"url": storage_url}})
    queues = [SharedQueue(config), SharedQueue(config)]
    workers = [
        _shared(make_slack, storage_url, plugins={"queue": queue}, founders=["UBOSS", "UCTO"]) for queue in queues
    ]
    clicks = [(APPROVE, "UBOSS"), (REJECT, "UCTO")]
    start = threading.Barrier(2)

    def click(worker, action, user):
        start.wait()
        worker.dispatch(button_press(action, "skill:x", user=user, channel="CAPPROVALS", ts="1700000050.000001"))

    pressers = [threading.Thread(target=click, args=(w, *c)) for w, c in zip(workers, clicks, strict=True)]
    for presser in pressers:
        presser.start()
    for presser in pressers:
        presser.join(30)
    fake = workers[0].fake
    [status, actor] = queues[0].db.execute("SELECT status, actor FROM items").fetchone()
    [update] = fake.calls_to("chat.update")  # the card shows one decision: the winner's
    assert update["ts"] == "1700000050.000001" and f"<@{actor}>" in update["text"]
    [told] = fake.calls_to("chat.postEphemeral")  # the other founder is told, privately
    loser = {"UBOSS", "UCTO"} - {actor}
    assert told["user"] in loser  # the other raced the decision, or came after it
    assert "skill:x was already decided" in told["text"] or "no pending item 'skill:x'" in told["text"]
    assert status == {"UBOSS": "approve", "UCTO": "reject"}[actor]
    for queue in queues:
        queue.db.close()


def test_socket_mode_with_two_worker_processes_answers_once_in_order(tmp_path, fake_slack, storage_url):
    import os
    import signal
    import subprocess
    import sys

    from thoth_slack.testing import FakeSocketMode

    socket_server = FakeSocketMode()
    fake_slack.socket_url = socket_server.url
    rules = ", ".join(f'{{ match = "q{i}\\\\b", reply = "a{i}" }}' for i in range(4))
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "replay"\n\n[storage]\nurl = "{storage_url}"\n\n[models.replay]\nrules = [{rules}]\n\n'
        '[plugins.slack]\nbot_token = { "$env" = "SLACK_BOT_TOKEN" }\napp_token = { "$env" = "SLACK_APP_TOKEN" }\n'
        f'api_url = "{fake_slack.url}"\nstream_interval = 0\n'
    )
    command = [sys.executable, "-c", "from thoth_core.cli import main; main()", "slack"]
    workers = []
    for i in range(2):  # each with its own data folder: only the store is shared
        env = dict(os.environ, THOTH_HOME=str(tmp_path / f"data-{i}"), THOTH_LOAD_PLUGINS="slack")
        env["THOTH_CONFIG"] = str(tmp_path / "thoth.toml")
        workers.append(subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True))
    try:
        assert socket_server.wait_for_connections(2), "the workers did not both connect"
        root = "1700000000.000100"
        for i in range(4):
            event = mention(f"q{i}", ts=root if i == 0 else f"1700000000.000{i + 1}00", thread_ts=root)
            payload = event_body(event)
            acked = [socket_server.push(payload, connection=c) for c in ((0, 1) if i % 2 == 0 else (1,))]
            for envelope in acked:  # even ones reach both connections (a redelivery); the next waits for the acks
                socket_server.wait_for_ack(envelope)
        fake_slack.wait_for("chat.update", lambda p: p["text"] == "a3", timeout=30)
        posts = [p for p in fake_slack.calls_to("chat.postMessage") if p.get("thread_ts") == root]
        finals = [[u["text"] for u in fake_slack.calls_to("chat.update") if u["ts"] == p["_ts"]][-1] for p in posts]
        assert finals == ["a0", "a1", "a2", "a3"]
    finally:
        for worker in workers:
            worker.send_signal(signal.SIGTERM)
        errors = [worker.communicate(timeout=60)[1] for worker in workers]
        socket_server.close()
    assert [worker.returncode for worker in workers] == [0, 0], errors


def test_a_waiting_message_is_stored_redacted_and_answered_from_the_text_received(make_slack):
    from thoth_slack.testing import dm

    from thoth_core.redact import find_secrets

    token = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    assert find_secrets(token), "the control: the redactor takes this for a secret"
    slack = make_slack(slack={"claim_seconds": 1}, replies=[{"reply": "checked"}])
    busy = Inbox(slack.bridge.inbox.db, 60, owner="busy-worker")
    assert busy.claim("DANN")  # another worker is answering this DM right now
    slack.send(dm(f"is {token} still valid?"))
    [(stored,)] = slack.bridge.inbox.db.execute("SELECT text FROM inbox").fetchall()
    assert token not in stored and "[REDACTED:" in stored
    busy.release("DANN")  # it finished; this worker's sweep finds the message waiting
    slack.fake.wait_for("chat.update", lambda p: p["text"] == "checked", timeout=20)
    slack.bridge.loop.join()
    assert token in slack.runtime.model().requests[-1].messages[-1].content
    assert slack.bridge.inbox.db.execute("SELECT text FROM inbox").fetchone()[0] == ""


def test_a_message_the_inbox_cannot_record_is_not_acked_and_is_answered_once_when_slack_sends_it_again(
    make_slack, caplog
):
    import json
    import logging

    from thoth_slack.testing import again, dm, event_body, signed

    slack = make_slack(replies=[{"reply": "still here"}])
    slack.bridge.inbox.db.execute("PRAGMA query_only = ON")  # as a full or read-only disk refuses the insert
    delivery = signed(json.dumps(event_body(dm("hello"))))
    with caplog.at_level(logging.WARNING, logger="thoth_slack.bridge"):
        refused = slack.dispatch(delivery)
    assert refused.status == 500 and slack.replies("DANN") == []  # not acked: Slack delivers it again
    assert "not acked, Slack sends it again" in caplog.text
    slack.bridge.inbox.db.execute("PRAGMA query_only = OFF")
    assert slack.dispatch(again(delivery)).status == 200
    assert slack.dispatch(again(delivery)).status == 200  # a second redelivery adds nothing
    assert slack.replies("DANN") == ["still here"]


def test_a_postgresql_restart_mid_thread_keeps_every_answer_once_and_in_order(make_slack, storage_url, pg_server):
    from thoth_core.testing.postgres import start_server, stop_server

    replies = [{"match": f"q{i}\\b", "reply": f"a{i}"} for i in range(8)]
    workers = [_shared(make_slack, storage_url, replies=replies) for _ in range(2)]
    root = "1700000000.000100"
    bodies = [json.dumps(event_body(mention("q0", ts=root)))]
    for i in range(1, 8):
        follow = {"type": "message", "channel_type": "channel", "user": "UANN", "text": f"q{i}", "channel": "CGENERAL"}
        bodies.append(json.dumps(event_body({**follow, "ts": f"1700000000.{(i + 1) * 100:06d}", "thread_ts": root})))

    def start_later() -> None:
        time.sleep(2.0)
        start_server(pg_server)

    restarter = threading.Thread(target=start_later)
    refused = 0
    for i, body in enumerate(
        bodies
    ):  # one worker gets each delivery; one it does not ack goes to the other, as Slack does
        if i == 3:  # stopped before the next delivery, so it meets the outage
            stop_server(pg_server)
            restarter.start()
        for attempt in range(20):
            if workers[(i + attempt) % 2].dispatch(signed(body), wait=False).status == 200:
                break
            refused += 1
        else:
            raise AssertionError(f"no worker acked q{i}")
    restarter.join(30)
    deadline = time.monotonic() + 60
    while len(workers[0].replies("CGENERAL", root)) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    for worker in workers:
        worker.bridge.loop.join()
    assert refused > 0  # the outage was seen: some delivery could not be recorded
    assert workers[0].replies("CGENERAL", root) == [f"a{i}" for i in range(8)]
