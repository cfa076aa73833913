"""The approvals policy (issue 36 item 1): one table of cases through the policy itself, the runtime and the chat
commands (`/approvals`, `/approve`, `/reject`, as a REPL or Slack types them); the other frontends run the same
table in their own tests."""

from __future__ import annotations

import logging
import re

import pytest

from thoth_core import ThothError, hookimpl
from thoth_core.approvals import Actor, ApprovalRefused, Policy, os_user
from thoth_core.config import Config
from thoth_core.testing.approvals import (
    ADMIN,
    CASES,
    OWNER,
    PERSON,
    WORKSPACE,
    AdminPlugin,
    Case,
    QueuePlugin,
    item_id,
    thoth_table,
)


def policy_of(case: Case) -> Policy:
    return Policy.of(Config(data={"thoth": thoth_table(case)}))


def item(about: str | None) -> dict:
    return {"id": item_id(about), "workspace": WORKSPACE if about else None, "peer": about}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_policy_itself(case: Case) -> None:
    actor = Actor(case.actor, WORKSPACE, admin=case.actor == ADMIN)
    refusal = policy_of(case).refusal(actor, case.action, item(case.about))
    assert (refusal is None) == case.allowed, refusal
    if not case.allowed and case.action != "list":
        assert refusal is not None and case.refusal in refusal and "\n" not in refusal
        assert refusal.startswith(f"{case.actor} may not {case.action} {item_id(case.about)}: ")


def table_runtime(make_runtime, case: Case) -> tuple:
    queue = QueuePlugin()
    runtime = make_runtime({"queue": queue, "admins": AdminPlugin()}, config={"thoth": thoth_table(case)})
    return runtime, queue


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_runtime(make_runtime, case: Case) -> None:
    runtime, queue = table_runtime(make_runtime, case)
    target = item_id(case.about)
    if case.action == "list":
        shown = {i["id"] for i in await runtime.approvals(actor=case.actor, workspace=WORKSPACE)}
        assert (target in shown) == case.allowed
        return
    text = "new words" if case.action == "edit" else None
    if case.allowed:
        await runtime.decide(target, case.action, actor=case.actor, text=text)
        assert queue.decided == [(target, case.action, case.actor)]
    else:
        with pytest.raises(ApprovalRefused, match=re.escape(case.refusal)):
            await runtime.decide(target, case.action, actor=case.actor, text=text)
        assert queue.decided == []  # a refused decision never reaches the plugin


CHAT = {"list": "/approvals", "approve": "/approve {id}", "reject": "/reject {id} not now"}


@pytest.mark.parametrize("case", [c for c in CASES if c.action in CHAT], ids=lambda c: c.id)
async def test_the_chat_commands(make_runtime, case: Case) -> None:
    runtime, queue = table_runtime(make_runtime, case)
    target = item_id(case.about)
    result = await runtime.turn(CHAT[case.action].format(id=target), peer=case.actor, thread="t")
    reply = result.reply.text
    if case.action == "list":
        assert (target in reply) == case.allowed, reply
        return
    assert bool(queue.decided) == case.allowed, reply
    if not case.allowed:
        assert (
            reply.startswith(f"/{case.action}: {case.actor} may not {case.action} {target}") and case.refusal in reply
        )


async def test_issue_36_a_stranger_no_longer_lists_or_approves_what_is_held_about_alice(make_runtime) -> None:
    """`/approvals` + `/approve` as `nobody4` listed 7 items about alice and approved one."""
    queue = QueuePlugin(people={PERSON: "alice"})
    runtime = make_runtime({"queue": queue}, config={"thoth": {"owner": OWNER}})
    listing = await runtime.turn("/approvals", peer="nobody4", thread="n")
    assert listing.reply.text == "nothing is waiting for approval"
    approve = await runtime.turn(f"/approve {item_id(PERSON)}", peer="nobody4", thread="n")
    assert "nobody4 may not approve table:bob: it is not about you" in approve.reply.text and queue.decided == []
    mine = await runtime.turn("/approvals", peer="alice", thread="n")
    assert mine.reply.text.startswith(item_id(PERSON)) and "table:ann" not in mine.reply.text


def test_the_owner_defaults_to_the_os_user_and_founders_replace_them() -> None:
    assert Policy.of(Config()).owner == os_user() != ""
    assert Policy.of(Config(data={"thoth": {"owner": "ann"}})).owner == "ann"
    founders = Policy.of(Config(data={"thoth": {"founders": ["lead"]}}))
    assert founders.decides(Actor("lead", "w"), item(PERSON))
    assert not founders.decides(Actor(os_user(), "w"), item(PERSON))


@pytest.mark.parametrize(
    ("thoth", "key"),
    [({"owner": ""}, "thoth.owner"), ({"owner": 3}, "thoth.owner"), ({"founders": ["lead", ""]}, "thoth.founders")],
)
def test_a_bad_owner_or_founders_is_one_line_naming_the_key(thoth: dict, key: str) -> None:
    with pytest.raises(ThothError) as refused:
        Policy.of(Config(data={"thoth": thoth}))
    assert key in str(refused.value) and "\n" not in str(refused.value)


async def test_an_admin_is_asked_only_when_it_matters_and_only_of_the_workspace(make_runtime) -> None:
    asked = []

    class Frontend:
        @hookimpl
        def workspace_admin(self, peer: str, workspace: str) -> bool | None:
            asked.append((peer, workspace))
            return peer == ADMIN if workspace == "acme" else None

    runtime = make_runtime(
        {"queue": QueuePlugin(workspace="acme"), "frontend": Frontend()}, config={"thoth": {"owner": OWNER}}
    )
    assert len(await runtime.approvals(actor=OWNER)) == 4 and asked == []  # the owner: no need to ask
    assert len(await runtime.approvals(actor=ADMIN, workspace="acme")) == 4  # every item of acme, and no one's
    assert await runtime.approvals(actor=ADMIN, workspace="elsewhere") == []  # an admin of nothing here
    assert asked == [(ADMIN, "acme"), (ADMIN, "elsewhere")]


async def test_an_item_that_names_no_owner_is_shown_to_deciders_only_and_logged(make_runtime, caplog) -> None:
    class OldQueue:
        @hookimpl
        def approvals(self) -> list[dict]:
            return [{"id": "old:1", "kind": "old", "title": "t", "body": "b", "source": {"peer": PERSON}}]

    runtime = make_runtime({"old": OldQueue()}, config={"thoth": {"owner": OWNER}})
    with caplog.at_level(logging.ERROR):
        assert await runtime.approvals(actor=PERSON) == []
        assert [i["id"] for i in await runtime.approvals(actor=OWNER)] == ["old:1"]
    assert "plugin old: approvals item old:1 names no workspace and peer" in caplog.text


async def test_a_decision_on_nothing_pending_or_of_no_known_kind_is_one_line(make_runtime) -> None:
    runtime = make_runtime({"queue": QueuePlugin()}, config={"thoth": {"owner": OWNER}})
    with pytest.raises(ThothError, match=r"^no pending item 'table:zed'$"):
        await runtime.decide("table:zed", "approve", actor=OWNER)
    with pytest.raises(ThothError, match="unknown decision 'nod'; expected approve, edit, reject"):
        await runtime.decide(item_id(PERSON), "nod", actor=OWNER)
    with pytest.raises(ThothError, match="actor: expected a person's name"):
        await runtime.approvals(actor="  ")
