"""The shared table of approvals cases through the TUI: the approvals view (F3) lists what the actor may see and
decides with its keys; an item the actor cannot see is tried from a notice about it (keys a / x on a message)."""

from __future__ import annotations

import pytest
from thoth_tui import plugin as tui_plugin
from thoth_tui.app import ThothApp
from thoth_tui.approvals import ApprovalsScreen
from thoth_tui.chat import ChatMessage

from thoth_core.testing.approvals import CASES, AdminPlugin, Case, QueuePlugin, item_id, thoth_table


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_approvals_table(make_runtime, case: Case) -> None:
    queue = QueuePlugin()
    runtime = make_runtime(
        {"tui": tui_plugin, "queue": queue, "admins": AdminPlugin()}, config={"thoth": thoth_table(case)}
    )
    app = ThothApp(runtime, peer=case.actor, thread="t1")
    target = item_id(case.about)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f3")
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ApprovalsScreen)
        shown = [item["id"] for item in screen.items]
        if case.action == "list":
            assert (target in shown) == case.allowed
            return
        if target in shown:  # decided in the approvals view
            while screen.selected()["id"] != target:
                await pilot.press("down")
            if case.action == "edit":
                await screen.action_decide("edit", text="new words")
            else:
                await pilot.press({"approve": "a", "reject": "x"}[case.action])
            await app.workers.wait_for_complete()
            await pilot.pause()
            said = str(screen.query_one("#approval-status").render())
        else:  # not shown: tried from a notice that names it
            await pilot.press("escape")
            notice = ChatMessage("notice", f"approval_requested: {target}", item_id=target)
            await app.react(notice, case.action)
            said = app.query(ChatMessage).last().text
    if case.allowed:
        assert queue.decided == [(target, case.action, case.actor)], said
    else:
        assert queue.decided == [] and case.refusal in said, said
