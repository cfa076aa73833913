"""Reactions, approval cards and buttons, founder DMs, check-ins and idle sessions."""

from __future__ import annotations

import asyncio
import time

import pytest
from thoth_slack.cards import APPROVE, REJECT
from thoth_slack.testing import mention

from thoth_core import ThothError, hookimpl
from thoth_core._calls import call_each

REACTIONS = [
    ("brain", "remember"),
    ("wastebasket", "forget"),
    ("bust_in_silhouette", "identity"),
    ("white_check_mark", "approve"),
    ("x", "reject"),
]


PENDING = ("skill:deploy-notes", "skill:one", "skill:two", "skill:x", "skill:gone")  # agent-wide: deciders only


def pending_item(item_id, *, workspace=None, peer=None):
    """An approvals item as the hook returns it."""
    return {
        "id": item_id,
        "kind": "skill",
        "title": item_id,
        "body": "",
        "workspace": workspace,
        "peer": peer,
        "source": {},
        "flags": [],
        "created_at": 0,
    }


class Layers:
    """Stands in for the memory layers: records feedback, decisions, session ends; serves check-ins and items."""

    def __init__(self, check_ins=None):
        self.feedback_calls, self.decisions, self.ended = [], [], []
        self.check_ins = list(check_ins or [])

    @hookimpl
    def approvals(self):
        return [pending_item(item_id) for item_id in PENDING]

    @hookimpl
    def feedback(self, kind, turn_id, text, actor, session):
        self.feedback_calls.append((kind, turn_id, text, actor, session.thread))
        return {"message": f"{kind} handled"}

    @hookimpl
    def decide(self, item_id, decision, actor):
        if not item_id.startswith("skill:"):
            return None
        if item_id == "skill:gone":
            raise ThothError("skill:gone was already approved")
        self.decisions.append((item_id, decision, actor))
        return {"message": f"skill {decision}d"}

    @hookimpl
    def session_end(self, session, reason):
        self.ended.append((session.thread, reason))

    @hookimpl
    def due_check_ins(self, now, accept):
        due = [c for c in self.check_ins if c["at"] <= now and accept(c)]
        self.check_ins = [c for c in self.check_ins if c not in due]
        return due


async def notified(runtime, event, **payload):
    """Send a notification through the runtime and wait until the frontends delivered it."""
    runtime.notify(event, **payload)
    await runtime.drain()


def _reply(slack, text="how do we deploy?"):
    slack.send(mention(text, ts="1700000000.000100"))
    [post] = slack.fake.calls_to("chat.postMessage")
    return post


def test_each_reaction_on_a_reply_is_feedback_and_is_acknowledged(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers}, replies=[{"reply": "Use blue-green deploys."}])
    post = _reply(slack)
    [session] = slack.runtime.sessions.values()
    turn_id = session.transcript[-1]["turn_id"]
    for name, _ in REACTIONS:
        slack.react(name, user="UANN", channel="CGENERAL", ts=post["_ts"])
    assert layers.feedback_calls == [
        (kind, turn_id, "Use blue-green deploys.", "UANN", "CGENERAL:1700000000.000100") for _, kind in REACTIONS
    ]
    acks = slack.fake.calls_to("chat.postMessage")[1:]
    assert [a["thread_ts"] for a in acks] == ["1700000000.000100"] * 5
    assert [a["text"].split(":")[1] for a in acks] == [name for name, _ in REACTIONS]
    assert "remembered: remember handled" in acks[0]["text"] and "forgotten: forget handled" in acks[1]["text"]


def test_reactions_elsewhere_are_ignored(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers})
    post = _reply(slack)
    slack.react("brain", user="UANN", channel="CGENERAL", ts="1700000000.000100")  # the person's own message
    slack.react("thumbsup", user="UANN", channel="CGENERAL", ts=post["_ts"])  # not in the protocol
    slack.react("brain", user="UBOT", channel="CGENERAL", ts=post["_ts"])  # the agent itself
    assert layers.feedback_calls == []
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


def test_reaction_without_a_taker_says_so(make_slack):
    slack = make_slack()
    post = _reply(slack)
    slack.react("brain", user="UANN", channel="CGENERAL", ts=post["_ts"])
    assert slack.fake.calls_to("chat.postMessage")[-1]["text"] == ":brain: remembered: no memory layer took it"


def test_approval_card_approved_by_a_founder_shows_who_decided(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers}, founders=["UBOSS"])
    slack.call(
        notified(
            slack.runtime,
            "approval_requested",
            item_id="skill:deploy-notes",
            text="Reflection drafted deploy-notes.",
            thread="CGENERAL:1.2",
        )
    )
    card = slack.fake.wait_for("chat.postMessage", lambda p: p["channel"] == "CAPPROVALS")
    buttons = [b for block in card["blocks"] if block["type"] == "actions" for b in block["elements"]]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        (APPROVE, "skill:deploy-notes"),
        (REJECT, "skill:deploy-notes"),
    ]
    assert "Reflection drafted deploy-notes." in str(card["blocks"])

    response = slack.click(APPROVE, "skill:deploy-notes", user="UBOSS", channel="CAPPROVALS", ts=card["_ts"])
    assert response.status == 200
    assert layers.decisions == [("skill:deploy-notes", "approve", "UBOSS")]
    [update] = slack.fake.calls_to("chat.update")
    assert update["ts"] == card["_ts"] and "actions" not in [b["type"] for b in update["blocks"]]
    assert ":white_check_mark: Approved by <@UBOSS> - skill approved" in str(update["blocks"])


def test_a_non_founder_cannot_approve_or_reject(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers}, founders=["UBOSS"])
    slack.call(notified(slack.runtime, "approval_requested", item_id="skill:deploy-notes", text="draft"))
    card = slack.fake.wait_for("chat.postMessage", lambda p: p["channel"] == "CAPPROVALS")
    slack.click(APPROVE, "skill:deploy-notes", user="UINTERN", channel="CAPPROVALS", ts=card["_ts"])
    slack.click(REJECT, "skill:deploy-notes", user="UINTERN", channel="CAPPROVALS", ts=card["_ts"])
    slack.react("white_check_mark", user="UINTERN", channel="CAPPROVALS", ts=card["_ts"])
    assert layers.decisions == [] and slack.fake.calls_to("chat.update") == []
    whispers = slack.fake.calls_to("chat.postEphemeral")
    assert [w["user"] for w in whispers] == ["UINTERN"] * 3
    assert all("only founders decide (UBOSS); your decision was not counted" in w["text"] for w in whispers)
    assert "UINTERN may not approve skill:deploy-notes: it is not about you" in whispers[0]["text"]


def test_a_founder_rejects_with_the_button_and_approves_by_reaction(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers}, founders=["UBOSS"])
    slack.call(notified(slack.runtime, "approval_requested", item_id="skill:one", text="first"))
    slack.call(notified(slack.runtime, "approval_requested", item_id="skill:two", text="second"))
    one, two = slack.fake.calls_to("chat.postMessage")
    slack.click(REJECT, "skill:one", user="UBOSS", channel="CAPPROVALS", ts=one["_ts"])
    slack.react("white_check_mark", user="UBOSS", channel="CAPPROVALS", ts=two["_ts"])
    assert layers.decisions == [("skill:one", "reject", "UBOSS"), ("skill:two", "approve", "UBOSS")]
    texts = [str(u["blocks"]) for u in slack.fake.calls_to("chat.update")]
    assert ":x: Rejected by <@UBOSS>" in texts[0] and ":white_check_mark: Approved by <@UBOSS>" in texts[1]


def test_with_no_founders_the_workspaces_admins_decide_and_no_one_else(make_slack):
    """Issue 36: with `founders = []` anyone could decide anything; now the workspace's admins do (users.info)."""
    layers = Layers()
    slack = make_slack({"layers": layers})
    slack.fake.admins = {"UADMIN"}
    slack.call(notified(slack.runtime, "approval_requested", item_id="skill:x", text="t"))
    card = slack.fake.wait_for("chat.postMessage")
    slack.click(APPROVE, "skill:x", user="UANYONE", channel="CAPPROVALS", ts=card["_ts"])
    assert layers.decisions == []
    [whisper] = slack.fake.calls_to("chat.postEphemeral")
    assert whisper["user"] == "UANYONE" and "or an admin of the item's workspace decides" in whisper["text"]
    slack.click(APPROVE, "skill:x", user="UADMIN", channel="CAPPROVALS", ts=card["_ts"])
    assert layers.decisions == [("skill:x", "approve", "UADMIN")]
    asked = [p["user"] for p in slack.fake.calls_to("users.info")]
    assert asked == ["UANYONE", "UADMIN"]  # asked once each: answers are kept a minute


def test_a_failed_decision_is_told_to_the_decider(make_slack):
    slack = make_slack({"layers": Layers()}, founders=["UBOSS"])
    slack.click(APPROVE, "skill:gone", user="UBOSS", channel="CAPPROVALS", ts="1700000099.000001")
    [whisper] = slack.fake.calls_to("chat.postEphemeral")
    assert whisper["user"] == "UBOSS" and "already approved" in whisper["text"]
    assert slack.fake.calls_to("chat.update") == []


def test_approve_reaction_on_a_reply_naming_one_item_decides_it(make_slack):
    layers = Layers()
    slack = make_slack(
        {"layers": layers}, founders=["UBOSS"], replies=[{"reply": "Pending: skill:deploy-notes (drafted last night)."}]
    )
    post = _reply(slack, "/approvals?")
    slack.react("white_check_mark", user="UBOSS", channel="CGENERAL", ts=post["_ts"])
    assert layers.decisions == [("skill:deploy-notes", "approve", "UBOSS")] and layers.feedback_calls == []
    assert slack.fake.calls_to("chat.postMessage")[-1]["text"].startswith("`skill:deploy-notes` approved by <@UBOSS>")


def test_persona_observations_are_dms_to_each_founder(make_slack):
    slack = make_slack({"layers": Layers()}, founders=["UBOSS", "UCTO"])
    slack.call(
        notified(
            slack.runtime,
            "persona_observation",
            item_id="persona:7",
            text="Ann prefers short answers.",
            thread="CGENERAL:1.2",
        )
    )
    assert [o["users"] for o in slack.fake.calls_to("conversations.open")] == ["UBOSS", "UCTO"]
    cards = slack.fake.calls_to("chat.postMessage")
    assert [c["channel"] for c in cards] == ["DBOSS", "DCTO"]
    assert all("Ann prefers short answers." in str(c["blocks"]) and "persona:7" in str(c["blocks"]) for c in cards)
    slack.call(notified(slack.runtime, "persona_observation", item_id="persona:8", text="Ann works late."))
    assert len(slack.fake.calls_to("conversations.open")) == 2  # DM channels are opened once
    assert [c["channel"] for c in slack.fake.calls_to("chat.postMessage")[2:]] == ["DBOSS", "DCTO"]
    slack.click(APPROVE, "persona:7", user="UCTO", channel="DCTO", ts=cards[1]["_ts"])
    assert "Only founders" not in str(slack.fake.calls_to("chat.postEphemeral"))


def test_check_ins_post_in_their_thread(make_slack):
    now = time.time()
    layers = Layers(
        check_ins=[
            {
                "workspace": "T1",
                "peer": "UANN",
                "thread": "CGENERAL:1700000000.000100",
                "text": "How did the deploy go?",
                "at": now - 5,
            },
            {"workspace": "T1", "peer": "UANN", "thread": "DANN", "text": "Tomorrow's check-in", "at": now + 86400},
            {"workspace": "T1", "peer": "UANN", "thread": "cli", "text": "not a Slack thread", "at": now - 5},
            {"workspace": "T9", "peer": "UBOB", "thread": "CGENERAL:1.2", "text": "another workspace", "at": now - 5},
        ]
    )
    slack = make_slack({"layers": layers}, slack={"allowed_workspaces": ["T1"]})
    slack.call(slack.bridge.tick(now=now))
    assert [c["text"] for c in layers.check_ins if c["at"] <= now] == ["not a Slack thread", "another workspace"]
    [post] = slack.fake.calls_to("chat.postMessage")
    assert (post["channel"], post["thread_ts"], post["text"]) == (
        "CGENERAL",
        "1700000000.000100",
        "How did the deploy go?",
    )
    slack.call(slack.bridge.tick(now=now + 86401))
    assert slack.fake.calls_to("chat.postMessage")[-1]["channel"] == "DANN"


def test_sessions_end_after_thirty_idle_minutes_per_thread(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers})
    slack.send(mention("first thread", ts="1700000000.000100"))
    slack.send(mention("second thread", ts="1700000000.000200"))
    second = slack.runtime.sessions[("T1", "UANN", "CGENERAL:1700000000.000200")]
    second.last_active = time.time() + 20 * 60  # the second thread was active 20 minutes later
    slack.call(slack.bridge.tick(now=time.time() + 29 * 60))
    assert layers.ended == []
    slack.call(slack.bridge.tick(now=time.time() + 31 * 60))
    slack.call(slack.runtime.drain())
    assert layers.ended == [("CGENERAL:1700000000.000100", "idle")]
    assert list(slack.runtime.sessions) == [("T1", "UANN", "CGENERAL:1700000000.000200")]


def test_stopping_past_a_hung_turn_still_ends_sessions_and_closes(make_slack, caplog):
    layers = Layers()
    slack = make_slack({"layers": layers})
    slack.send(mention("hello"))
    hung = slack.bridge.loop.submit(asyncio.Event().wait())  # work that never finishes
    slack.bridge.stop(wait_seconds=0.2)
    assert layers.ended == [("CGENERAL:1700000000.000100", "exit")] and hung.cancelled()
    assert "still running after" in caplog.text


def test_stopping_ends_open_sessions(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers})
    slack.send(mention("hello"))
    slack.bridge.stop()
    assert layers.ended == [("CGENERAL:1700000000.000100", "exit")]


def test_without_an_approvals_channel_cards_go_to_founders(make_slack):
    slack = make_slack(founders=["UBOSS"], slack={"approvals_channel": None})
    slack.bridge.deliver("approval_requested", {"item_id": "skill:x", "text": "draft"})
    [card] = slack.fake.calls_to("chat.postMessage")
    assert card["channel"] == "DBOSS" and "skill:x" in str(card["blocks"])


def test_plain_observations_and_reminders(make_slack):
    slack = make_slack(founders=["UBOSS"])
    slack.bridge.deliver("persona_observation", {"text": "Ann likes tables."})
    slack.bridge.deliver("approval_reminder", {"text": "2 item(s) wait for review", "items": ["skill:a", "skill:b"]})
    dm, reminder = slack.fake.calls_to("chat.postMessage")
    assert (dm["channel"], dm["text"]) == ("DBOSS", "*Persona observation*\nAnn likes tables.")
    assert (reminder["channel"], reminder["text"]) == ("CAPPROVALS", "2 item(s) wait for review")


def test_only_the_person_in_the_conversation_or_a_founder_reacts_on_its_memory(make_slack):
    layers = Layers()
    slack = make_slack({"layers": layers}, founders=["UBOSS"])
    post = _reply(slack)  # a turn of UANN's
    slack.react("wastebasket", user="UBOB", channel="CGENERAL", ts=post["_ts"])
    assert layers.feedback_calls == []
    [whisper] = slack.fake.calls_to("chat.postEphemeral")
    assert whisper["user"] == "UBOB" and "Only <@UANN> (or a founder)" in whisper["text"]
    slack.react("wastebasket", user="UBOSS", channel="CGENERAL", ts=post["_ts"])
    assert [(kind, actor) for kind, _, _, actor, _ in layers.feedback_calls] == [("forget", "UBOSS")]


def test_a_reaction_on_a_reply_from_before_a_restart_still_reaches_its_turn(make_slack):
    first = make_slack({"layers": Layers()}, replies=[{"reply": "Use blue-green deploys."}])
    post = _reply(first)
    [session] = first.runtime.sessions.values()
    turn_id = session.transcript[-1]["turn_id"]
    first.bridge.stop()

    layers = Layers()
    restarted = make_slack({"layers": layers})
    restarted.react("wastebasket", user="UANN", channel="CGENERAL", ts=post["_ts"])
    assert layers.feedback_calls == [
        ("forget", turn_id, "Use blue-green deploys.", "UANN", "CGENERAL:1700000000.000100")
    ]
    assert restarted.runtime.sessions == {}  # the feedback did not open a session
    restarted.react("wastebasket", user="UBOB", channel="CGENERAL", ts=post["_ts"])
    assert len(layers.feedback_calls) == 1  # only the person (or a founder), as before the restart


class FullDisk:
    """A layer that cannot persist: its post-turn write fails like a full disk."""

    LAYER = "episodic"

    @hookimpl
    def post_turn_write(self, turn):
        raise OSError(28, "No space left on device")


def test_a_turn_a_layer_could_not_save_is_told_privately_to_the_person_in_its_thread(make_slack):
    slack = make_slack({"episodic": FullDisk()}, replies=[{"reply": "Use blue-green deploys."}])
    _reply(slack)
    slack.call(slack.runtime.drain())  # the post-turn writes, then the notice, run after the reply
    whisper = slack.fake.wait_for("chat.postEphemeral")
    assert (whisper["channel"], whisper["user"], whisper["thread_ts"]) == ("CGENERAL", "UANN", "1700000000.000100")
    assert whisper["text"] == (
        ":warning: Not saved yet: episodic (OSError: [Errno 28] No space left on device); "
        "kept in the journal and retried at the next start."
    )
    assert len(slack.fake.calls_to("chat.postMessage")) == 1  # only the reply: nothing public about it


def test_unsaved_turns_of_other_frontends_are_not_posted(make_slack):
    slack = make_slack()
    failed = {"identity": "OperationalError: database is locked"}
    slack.call(notified(slack.runtime, "turn_unsaved", turn_id="t1", peer="ann", thread="tui", failed=failed))
    slack.call(notified(slack.runtime, "turn_unsaved", turn_id="t2", peer="ann", thread="C1:1.2", failed=failed))
    slack.bridge.deliver("turn_unsaved", {"turn_id": "t3", "peer": "UANN", "thread": "DANN", "failed": failed})
    [whisper] = slack.fake.calls_to("chat.postEphemeral")  # only the Slack user's DM
    assert (whisper["channel"], whisper["user"], whisper.get("thread_ts")) == ("DANN", "UANN", None)
    assert slack.fake.calls_to("chat.postMessage") == []


def test_texts_from_other_layers_cannot_ping(make_slack):
    slack = make_slack(founders=["UBOSS"])
    slack.bridge.deliver(
        "approval_requested", {"item_id": "skill:x", "text": "<!channel> approve me", "title": "<!here>"}
    )
    slack.bridge.deliver("check_in", {"thread": "CGENERAL:1.2", "text": "<!everyone> how did it go?"})
    card, check_in = slack.fake.calls_to("chat.postMessage")
    assert "<!" not in str(card["blocks"]) and "&lt;!channel&gt; approve me" in str(card["blocks"])
    assert check_in["text"] == "&lt;!everyone&gt; how did it go?"


def test_with_the_real_identity_layer_a_reaction_becomes_a_noted_observation(make_slack):
    identity = pytest.importorskip("thoth_identity.plugin")  # a sibling distribution; skipped when not installed
    slack = make_slack({"identity": identity}, replies=[{"purpose": "turn", "reply": "Noted: I live in Oslo"}])
    post = _reply(slack, "where do I live?")
    before = slack.call(slack.runtime.status(peer="UANN", workspace="T1"))
    slack.react("bust_in_silhouette", user="UANN", channel="CGENERAL", ts=post["_ts"])
    ack = slack.fake.calls_to("chat.postMessage")[-1]["text"]
    assert ack.startswith(":bust_in_silhouette: sent to the identity layer: Noted about UANN") and "Oslo" in ack
    after = slack.call(slack.runtime.status(peer="UANN", workspace="T1"))
    [before], [after] = ([s for s in status if s["layer"] == "identity"] for status in (before, after))
    assert after["observations"] == before["observations"] + 1 and after["facts"] == before["facts"] == 0


def test_with_the_real_episodic_layer_the_wastebasket_deletes_the_episode(make_slack):
    episodic = pytest.importorskip("thoth_episodic.plugin")  # a sibling distribution; skipped when not installed
    slack = make_slack({"episodic": episodic}, replies=[{"reply": "Blue-green, with a smoke test first."}])
    post = _reply(slack, "how do we deploy?")
    slack.call(slack.runtime.drain())  # the episode is written after the reply

    def episodes():
        status = slack.call(slack.runtime.status(peer="UANN", workspace="T1"))
        return [s["episodes"] for s in status if s["layer"] == "episodic"]

    assert episodes() == [1]
    slack.react("wastebasket", user="UANN", channel="CGENERAL", ts=post["_ts"])
    assert slack.fake.calls_to("chat.postMessage")[-1]["text"].startswith(":wastebasket: forgotten: forgot the episode")
    assert episodes() == [0]


def test_with_the_real_procedural_layer_a_founder_installs_a_skill_from_its_card(make_slack, tmp_path):
    procedural = pytest.importorskip("thoth_procedural.plugin")  # a sibling distribution; skipped when not installed
    slack = make_slack({"procedural": procedural}, founders=["UBOSS"], root=tmp_path)
    session = slack.call(slack.runtime.session(peer="UANN", thread="CGENERAL:1700000000.000100", workspace="T1"))
    skill = {
        "name": "deploy-notes",
        "description": "How this team deploys.",
        "body": "# Deploy\n\nBlue-green, smoke test first.",
    }
    result = {"run_id": "run-1", "session_id": session.id, "skill": skill, "flags": {}}
    slack.call(call_each(slack.runtime.pm, "reflection_result", {"result": result, "session": session}))
    slack.call(slack.runtime.drain())
    card = slack.fake.wait_for("chat.postMessage", lambda p: p["channel"] == "CAPPROVALS")
    assert "How this team deploys." in str(card["blocks"])
    [item_id] = {b["value"] for block in card["blocks"] if block["type"] == "actions" for b in block["elements"]}
    assert item_id.startswith("skill:deploy-notes--")  # UANN's draft, keyed by its owner
    slack.click(APPROVE, item_id, user="UINTERN", channel="CAPPROVALS", ts=card["_ts"])
    assert not (tmp_path / ".claude" / "skills" / "deploy-notes").exists()
    slack.click(APPROVE, item_id, user="UANN", channel="CAPPROVALS", ts=card["_ts"])  # the person: withdraw only
    assert not (tmp_path / ".claude" / "skills" / "deploy-notes").exists()
    slack.click(APPROVE, item_id, user="UBOSS", channel="CAPPROVALS", ts=card["_ts"])
    assert (tmp_path / ".claude" / "skills" / "deploy-notes" / "SKILL.md").exists()
    [update] = slack.fake.calls_to("chat.update")
    assert "Approved by <@UBOSS> - approved skill deploy-notes" in str(update["blocks"])
