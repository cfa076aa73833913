"""The shared table of approvals cases through Slack: `/approvals` in a DM lists what the person may see; the
Approve / Reject buttons of a card decide, or whisper the policy's one line. People are Slack user ids; the
workspace's admin is whoever the fake Web API's `users.info` says (the real `WebClient` asks it)."""

from __future__ import annotations

import pytest
from thoth_slack.cards import APPROVE, REJECT
from thoth_slack.testing import TEAM, dm

from thoth_core.testing.approvals import ADMIN, CASES, FOUNDER, OWNER, PERSON, STRANGER, Case, QueuePlugin, item_id

PEOPLE = {OWNER: "UANN", PERSON: "UBOB", STRANGER: "UEVE", FOUNDER: "ULEAD", ADMIN: "UCARL"}
BUTTONS = {"approve": APPROVE, "reject": REJECT}


@pytest.mark.parametrize("case", [c for c in CASES if c.action != "edit"], ids=lambda c: c.id)  # Slack has no edit
def test_the_approvals_table(make_slack, case: Case) -> None:
    queue = QueuePlugin(people=PEOPLE, workspace=TEAM)
    founders = [PEOPLE[FOUNDER]] if case.founders else []
    slack = make_slack({"queue": queue}, founders=founders, thoth={"owner": PEOPLE[OWNER]})
    slack.fake.admins = {PEOPLE[ADMIN]}
    actor, target = PEOPLE[case.actor], item_id(case.about)
    if case.action == "list":
        slack.send(dm("/approvals", user=actor, channel=f"D{actor[1:]}"))
        [reply] = [p for p in slack.fake.calls_to("chat.postMessage") if p["channel"] == f"D{actor[1:]}"]
        listed = " ".join(str(u.get("text")) for u in slack.fake.calls_to("chat.update")) + str(reply.get("text"))
        assert (target in listed) == case.allowed, listed
        return
    slack.click(BUTTONS[case.action], target, user=actor, channel="CAPPROVALS", ts="1700000050.000001")
    whispers = slack.fake.calls_to("chat.postEphemeral")
    if case.allowed:
        assert queue.decided == [(target, case.action, actor)] and whispers == []
        [update] = slack.fake.calls_to("chat.update")
        assert f"by <@{actor}>" in update["text"]
    else:
        assert queue.decided == [] and slack.fake.calls_to("chat.update") == []
        [whisper] = whispers
        assert whisper["user"] == actor and case.refusal in whisper["text"], whisper["text"]
