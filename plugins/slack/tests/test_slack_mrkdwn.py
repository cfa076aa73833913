"""Model Markdown becomes escaped Slack mrkdwn; long replies are split."""

from __future__ import annotations

from thoth_slack.mrkdwn import split, to_mrkdwn
from thoth_slack.testing import mention

from thoth_core import hookimpl


def test_replies_cannot_ping_or_inject_markup():
    assert to_mrkdwn("hey <!channel> and <@U123> & co") == "hey &lt;!channel&gt; and &lt;@U123&gt; &amp; co"


def test_markdown_is_rewritten_outside_code():
    text = (
        "# Plan\n**Deploy** the __app__, see [docs](https://x.test/a?b=1&c=2), ~~old~~.\n"
        "```\n**kept** <b>\n```\nand `**x**`"
    )
    assert to_mrkdwn(text) == (
        "*Plan*\n*Deploy* the *app*, see <https://x.test/a?b=1&c=2|docs>, ~old~.\n"
        "```\n**kept** &lt;b&gt;\n```\nand `**x**`"
    )


def test_split_prefers_line_breaks_and_keeps_everything():
    text = "\n".join(f"line {i:04d} " + "x" * 80 for i in range(120))
    pieces = split(text, limit=1000)
    assert all(len(p) <= 1000 for p in pieces) and len(pieces) > 1
    assert "\n".join(pieces) == text
    assert split("y" * 2500, limit=1000) == ["y" * 1000, "y" * 1000, "y" * 500]


def test_a_long_reply_continues_in_the_thread_and_each_part_takes_reactions(make_slack):
    got = []

    class Memory:
        @hookimpl
        def feedback(self, kind, turn_id):
            got.append((kind, turn_id))
            return {"message": "ok"}

    long_reply = "\n".join(f"Step {i}: " + "do the thing carefully " * 8 for i in range(60))
    slack = make_slack({"memory": Memory()}, replies=[{"reply": long_reply}])
    slack.send(mention("explain everything"))
    posts = [p for p in slack.fake.calls_to("chat.postMessage") if p.get("thread_ts") == "1700000000.000100"]
    assert len(posts) == 3
    first = slack.final_text("CGENERAL", posts[0])
    assert first.startswith("Step 0:") and not first.endswith("…")
    assert "\n".join([first] + [p["text"] for p in posts[1:]]) == long_reply
    slack.react("brain", user="UANN", channel="CGENERAL", ts=posts[2]["_ts"])
    [session] = slack.runtime.sessions.values()
    assert got == [("remember", session.transcript[-1]["turn_id"])]
