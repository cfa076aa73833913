"""Messages in, threaded streaming replies out: mentions, DMs, bots ignored, many threads at once."""

from __future__ import annotations

import asyncio
import re
import threading

from thoth_slack.testing import dm, mention

from thoth_core import Usage, hookimpl


def test_mention_gets_a_threaded_streamed_reply(make_slack):
    slack = make_slack(replies=[{"match": "deploy", "reply": "Deploy from main after the checks pass."}])
    response = slack.send(mention("how do we deploy?", ts="1700000000.000100"))
    assert response.status == 200
    [post] = slack.fake.calls_to("chat.postMessage")
    assert (post["channel"], post["thread_ts"]) == ("CGENERAL", "1700000000.000100")
    updates = [u["text"] for u in slack.fake.calls_to("chat.update") if u["ts"] == post["_ts"]]
    assert len(updates) > 2, "the reply streams as several updates of the placeholder"
    assert updates[-1] == "Deploy from main after the checks pass."
    assert updates[0].startswith("Deploy") and len(updates[0]) < len(updates[-1])
    [session] = slack.runtime.sessions.values()
    assert session.key == ("T1", "UANN", "CGENERAL:1700000000.000100")
    assert session.history[0].content == "how do we deploy?"  # the mention itself is stripped


def test_a_network_error_while_streaming_does_not_fail_the_turn(make_slack):
    slack = make_slack(replies=[{"reply": "Deploy from main after the checks pass."}])
    slack.fake.dropped["chat.update"] = 2  # the first streaming update and its retry find no Slack
    slack.send(mention("how do we deploy?", ts="1700000000.000100"))
    assert slack.fake.refused == ["chat.update", "chat.update"]
    assert slack.replies("CGENERAL", "1700000000.000100") == ["Deploy from main after the checks pass."]
    [session] = slack.runtime.sessions.values()
    assert [t["type"] for t in session.transcript if t["type"] in ("turn", "error")] == ["turn"]


def test_api_calls_carry_the_bot_token(make_slack):
    slack = make_slack()
    slack.send(mention("hello"))
    headers = [h for method, _, h in slack.fake.calls if method == "chat.postMessage"]
    assert headers and all(h.get("Authorization") == "Bearer xoxb-test-token" for h in headers)


def test_dm_is_answered_in_the_conversation(make_slack):
    slack = make_slack(replies=[{"reply": "Hi Ann"}])
    slack.send(dm("hello there"))
    assert slack.replies("DANN") == ["Hi Ann"]
    [session] = slack.runtime.sessions.values()
    assert session.thread == "DANN"


def test_follow_up_in_a_thread_the_agent_is_in_is_answered(make_slack):
    slack = make_slack(replies=[{"match": "first", "reply": "one"}, {"reply": "two"}])
    slack.send(mention("first", ts="1700000000.000100"))
    follow_up = {
        "type": "message",
        "channel_type": "channel",
        "user": "UANN",
        "text": "and then?",
        "channel": "CGENERAL",
        "ts": "1700000000.000300",
        "thread_ts": "1700000000.000100",
    }
    slack.send(follow_up)
    assert slack.replies("CGENERAL", "1700000000.000100") == ["one", "two"]
    stranger = dict(follow_up, thread_ts="1700000009.000100", ts="1700000009.000200")
    slack.send(stranger)
    assert slack.replies("CGENERAL", "1700000009.000100") == []


def test_own_and_other_bots_messages_are_ignored(make_slack):
    slack = make_slack()
    slack.send(dm("I am a bot", bot_id="BOTHER", subtype="bot_message"))
    slack.send(dm("me again", user="UBOT"))
    slack.send(dm("edited", subtype="message_changed"))
    slack.send(dm("other bot with a user", bot_id="BOTHER", user="UOTHERBOT"))
    assert slack.fake.calls_to("chat.postMessage") == []
    assert slack.runtime.sessions == {}


def test_a_channel_message_with_a_mention_is_answered_once(make_slack):
    slack = make_slack()
    event = mention("hello")
    slack.send(event)
    slack.send({**event, "type": "message", "channel_type": "channel"})  # Slack sends both events
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


def test_slack_retries_are_answered_once_and_a_retry_of_a_lost_delivery_is_answered(make_slack):
    import json

    from thoth_slack.testing import again, event_body, signed

    slack = make_slack(replies=[{"reply": "hi"}])
    first = signed(json.dumps(event_body(mention("hello", ts="1700000000.000100"))))
    assert slack.dispatch(first).status == 200
    retry = again(first)
    retry.headers["x-slack-retry-num"] = ["1"]  # Slack did not see our ack in time and sends it again
    assert slack.dispatch(retry).status == 200
    assert slack.replies("CGENERAL", "1700000000.000100") == ["hi"]

    lost = signed(json.dumps(event_body(mention("anyone?", ts="1700000000.000200"))))
    lost.headers["x-slack-retry-num"] = ["1"]  # its first delivery died with the worker that got it
    assert slack.dispatch(lost).status == 200
    assert slack.replies("CGENERAL", "1700000000.000200") == ["hi"]


def test_model_errors_show_in_the_thread(make_slack):
    slack = make_slack(thoth={"model": "missing"})
    slack.send(mention("hello"))
    [text] = slack.replies("CGENERAL", "1700000000.000100")
    assert text.startswith(":warning:") and "unknown model provider 'missing'" in text


def test_slash_commands_and_new_session(make_slack):
    slack = make_slack()
    slack.send(dm("hello", ts="1.1"))
    first = next(iter(slack.runtime.sessions.values()))
    slack.send(dm("/whoami", ts="1.2"))
    slack.send(dm("/new", ts="1.3"))
    assert first.ended
    slack.send(dm("hello again", ts="1.4"))
    [second] = slack.runtime.sessions.values()
    assert second.id != first.id and second.thread == "DANN"
    slack.send(dm("/help", ts="1.5"))
    texts = slack.replies("DANN")
    assert "/whoami - who and where you are" in texts[-1] and "/new - end this session" in texts[-1]
    assert texts[1].startswith("peer UANN in workspace T1, thread DANN") and texts[2].startswith(
        "Started a new session"
    )


class EchoModel:
    """Echoes every user message it was sent; waits until `wait_for` requests are in flight at once."""

    name = "echo"

    def __init__(self, wait_for: int) -> None:
        self.wait_for, self.arrived, self.active, self.peak = wait_for, 0, 0, 0

    async def stream(self, request):
        self.arrived += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        target = -(-self.arrived // self.wait_for) * self.wait_for
        for _ in range(6000):  # up to ~30 s: only reachable if no thread blocks another
            if self.arrived >= target:
                break
            await asyncio.sleep(0.005)
        try:
            seen = [m.content for m in request.messages if m.role == "user"]
            context = request.system_text
            for word in ("seen:", *seen, "context:", context):
                yield word + " "
            yield Usage()
        finally:
            self.active -= 1


class EchoPlugin:
    def __init__(self, model):
        self.model = model

    @hookimpl
    def register_models(self, register):
        register("echo", lambda runtime, options: self.model)


class ThreadNotes:
    """A toy layer that remembers each session's first message and puts it in that session's context."""

    @hookimpl
    def pre_spawn_context(self, turn, session):
        from thoth_core import ContextBlock

        first = session.scratch.setdefault("first", turn.text)
        return ContextBlock(tag="thread-notes", text=f"first message here: {first}")


def test_twenty_threads_at_once_without_blocking_or_leaking(make_slack):
    threads = 20
    model = EchoModel(wait_for=threads)
    slack = make_slack({"echo": EchoPlugin(model), "notes": ThreadNotes()}, thoth={"model": "echo"})

    def converse(i: int, round_: int) -> None:
        ts = f"1700000100.{i:06d}"
        event = mention(
            f"token-{i:02d}-round-{round_}",
            user=f"U{i:02d}",
            ts=ts if round_ == 0 else f"1700000200.{i:06d}",
            thread_ts=ts,
        )
        slack.send(event, wait=False)

    for round_ in range(2):
        workers = [threading.Thread(target=converse, args=(i, round_)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(15)
        slack.bridge.loop.join()
        assert model.peak == threads, "all threads were in a turn at the same time"

    for i in range(threads):
        texts = slack.replies("CGENERAL", f"1700000100.{i:06d}")
        assert len(texts) == 2
        last = texts[-1]
        assert f"token-{i:02d}-round-0" in last and f"token-{i:02d}-round-1" in last
        assert set(re.findall(r"token-(\d\d)", last)) == {f"{i:02d}"}, (
            f"thread {i} saw another thread's content: {last}"
        )


def test_rate_limited_updates_are_retried_and_the_reply_lands(make_slack):
    slack = make_slack(replies=[{"reply": "one two three four five six"}])
    slack.fake.rate_limited["chat.update"] = 4
    slack.send(mention("count"))
    assert slack.fake.refused == ["chat.update"] * 4
    assert slack.replies("CGENERAL", "1700000000.000100") == ["one two three four five six"]
