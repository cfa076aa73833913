"""Replays and redeliveries: an event or a button press handled twice is answered once, also after a restart."""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
import time

from thoth_slack.cards import APPROVE
from thoth_slack.outbound import SEEN_KEEP_SECONDS, Ledger, Posted
from thoth_slack.testing import again, button_press, dm, event_body, mention, signed

from thoth_core import hookimpl


class Turns:
    """Records each turn that reached the pipeline, and each decision."""

    def __init__(self):
        self.texts, self.decisions = [], []

    @hookimpl
    def pre_spawn_context(self, turn):
        self.texts.append(turn.text)

    @hookimpl
    def approvals(self):
        return [
            {"id": "skill:deploy-notes", "kind": "skill", "title": "t", "body": "", "workspace": None, "peer": None}
        ]

    @hookimpl
    def decide(self, item_id, decision, actor):
        self.decisions.append((item_id, decision, actor))
        return {"message": "done"}


REPLIES = [{"reply": "first answer"}]


def _mention(text="how do we deploy?", **kwargs):
    return signed(json.dumps(event_body(mention(text, **kwargs))))


def test_the_same_signed_event_twice_is_one_turn_and_one_reply(make_slack, caplog):
    turns = Turns()
    slack = make_slack({"turns": turns}, replies=REPLIES)
    request = _mention()
    assert slack.dispatch(request).status == 200
    with caplog.at_level(logging.INFO, logger="thoth_slack.bridge"):
        replay = slack.dispatch(again(request))
    assert replay.status == 200  # acknowledged, so Slack does not retry it
    assert turns.texts == ["how do we deploy?"]
    assert slack.replies("CGENERAL", "1700000000.000100") == ["first answer"]
    assert len(slack.fake.calls_to("chat.postMessage")) == 1
    [record] = [r for r in caplog.records if "already handled" in r.getMessage()]
    assert record.levelno == logging.INFO and "event Ev" in record.getMessage()


def test_a_replay_after_a_restart_on_the_same_home_is_still_ignored(make_slack):
    first = make_slack({"turns": Turns()}, replies=REPLIES)
    request = _mention()
    first.dispatch(request)
    first.bridge.stop()

    turns = Turns()
    restarted = make_slack({"turns": turns}, replies=REPLIES)
    assert restarted.dispatch(again(request)).status == 200
    assert turns.texts == []
    assert len(restarted.fake.calls_to("chat.postMessage")) == 1  # only the first bridge's reply


def test_two_different_events_are_two_turns(make_slack):
    turns = Turns()
    slack = make_slack({"turns": turns}, replies=REPLIES)
    slack.send(mention("how do we deploy?"))
    slack.send(mention("how do we deploy?"))  # the same words, but a new event (its own event_id)
    assert turns.texts == ["how do we deploy?", "how do we deploy?"]
    assert slack.replies("CGENERAL", "1700000000.000100") == ["first answer", "first answer"]


def test_two_workers_sharing_the_home_answer_a_delivery_once(make_slack):
    one, other = Turns(), Turns()
    workers = [make_slack({"turns": one}, replies=REPLIES), make_slack({"turns": other}, replies=REPLIES)]
    request = _mention()
    start = threading.Barrier(2)
    statuses = []

    def deliver(worker, req):
        start.wait()
        statuses.append(worker.dispatch(req).status)

    threads = [threading.Thread(target=deliver, args=(w, again(request))) for w in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [200, 200]
    assert len(one.texts) + len(other.texts) == 1
    assert len(workers[0].fake.calls_to("chat.postMessage")) == 1


def test_the_same_button_press_twice_is_decided_once(make_slack):
    turns = Turns()
    slack = make_slack({"turns": turns}, founders=["UBOSS"])
    press = button_press(APPROVE, "skill:deploy-notes", user="UBOSS", channel="CAPPROVALS", ts="1700000050.000001")
    assert slack.dispatch(press).status == 200
    assert slack.dispatch(again(press)).status == 200
    assert turns.decisions == [("skill:deploy-notes", "approve", "UBOSS")]
    assert len(slack.fake.calls_to("chat.update")) == 1

    slack.click(APPROVE, "skill:deploy-notes", user="UBOSS", channel="CAPPROVALS", ts="1700000050.000001")
    assert len(turns.decisions) == 2  # a new press of the same button (a new trigger_id) counts again


def test_a_replayed_reaction_is_feedback_once(make_slack):
    got = []

    class Memory:
        @hookimpl
        def feedback(self, kind, turn_id):
            got.append((kind, turn_id))
            return {"message": "kept"}

    slack = make_slack({"memory": Memory()}, replies=REPLIES)
    slack.send(mention("hi"))
    [post] = slack.fake.calls_to("chat.postMessage")
    reaction = {
        "type": "reaction_added",
        "user": "UANN",
        "reaction": "brain",
        "item_user": "UBOT",
        "item": {"type": "message", "channel": "CGENERAL", "ts": post["_ts"]},
        "event_ts": "1",
    }
    request = signed(json.dumps(event_body(reaction)))
    slack.dispatch(request)
    slack.dispatch(again(request))
    assert len(got) == 1


def test_socket_mode_redelivery_of_an_event_is_answered_once(make_slack):
    turns = Turns()
    slack = make_slack({"turns": turns}, http=False, replies=REPLIES)
    from slack_bolt import BoltRequest

    body = event_body(dm("hello"))
    for _ in range(2):  # e.g. a second connection gets the same event
        response = slack.dispatch(BoltRequest(body=dict(body), mode="socket_mode"))
        assert response.status == 200
    assert turns.texts == ["hello"]
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


def test_seen_requests_are_kept_a_day_as_hashes_and_forget_leaves_them(tmp_path):
    path = tmp_path / "ledger.db"
    ledger = Ledger(path)
    now = time.time()
    assert ledger.first_time("event Ev0OLD", now=now - SEEN_KEEP_SECONDS - 60)
    assert ledger.first_time("event Ev1NEW", now=now)
    assert not ledger.first_time("event Ev1NEW", now=now + 1)
    ledger.add(Posted("CGENERAL", "1.1", None, "a reply", turn_id="t", workspace="T1", peer="UANN", thread="CGENERAL"))
    assert ledger.forget("T1", "UANN") == 1
    ledger.close()

    rows = sqlite3.connect(path).execute("SELECT key FROM seen").fetchall()
    assert len(rows) == 2 and all(len(key) == 64 and "Ev" not in key for (key,) in rows)  # hashes only

    reopened = Ledger(path)  # pruned on open: rows older than SEEN_KEEP_SECONDS go
    assert not reopened.first_time("event Ev1NEW", now=now + 2)
    assert reopened.first_time("event Ev0OLD", now=now + 2)  # forgotten after a day
    reopened.close()


def test_without_a_file_requests_are_remembered_in_memory():
    ledger = Ledger()
    assert ledger.first_time("event Ev1") and not ledger.first_time("event Ev1")
    assert ledger.first_time("event Ev2")


def test_a_file_that_cannot_be_written_still_lets_requests_through(tmp_path, caplog):
    ledger = Ledger(tmp_path / "ledger.db")
    ledger._db.execute("PRAGMA query_only = ON")  # as a read-only or full disk would refuse the insert
    with caplog.at_level(logging.WARNING, logger="thoth_slack.outbound"):
        assert ledger.first_time("event Ev1") and ledger.first_time("event Ev1")
    assert "could not record a request as handled" in caplog.text
    ledger.close()


def test_a_forged_request_does_not_use_up_its_event_id(make_slack):
    turns = Turns()
    slack = make_slack({"turns": turns}, replies=REPLIES)
    body = json.dumps(event_body(mention("hi")))
    assert slack.dispatch(signed(body, secret="forged")).status == 401
    assert slack.dispatch(signed(body)).status == 200
    assert turns.texts == ["hi"]
