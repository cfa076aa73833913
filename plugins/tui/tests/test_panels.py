"""Pilot tests of the layers panel, the approvals view, slash commands and the command palette."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList, TextArea
from thoth_tui.approvals import ApprovalsScreen
from thoth_tui.chat import ChatMessage
from thoth_tui.layers import LayersPanel, layer_views, render

from thoth_core.budget import block_tokens
from thoth_core.plugins import PluginInfo


def panel_text(app) -> str:
    return str(app.query_one("#layers-body").render())


async def test_layers_panel_after_a_turn(make_app, stand_ins, queue, wait, send):
    queue.add("weekly-report")
    app = make_app({**stand_ins, "queue": queue}, replies=[{"reply": "ok"}])
    app.runtime.pm.info["reflection"] = PluginInfo("reflection", "thoth-reflection", "0.1.0", enabled=False)
    async with app.run_test(size=(120, 40)) as pilot:
        assert app.query_one(LayersPanel).has_class("shown")  # wide enough to start open
        before = panel_text(app)
        assert "last turn" not in before and "pending approvals: 1" in before
        await send(app, pilot, "hello")
        text = panel_text(app)
    assembly = app.runtime.last.assembly
    card = next(b for b in assembly.blocks if b.tag == "peer-card")
    [cut] = assembly.cuts
    lines = text.splitlines()
    order = [next(i for i, line in enumerate(lines) if line.startswith(f"L{n} ")) for n in range(1, 6)]
    assert order == sorted(order)
    assert "L1 working · Malkuth\n  not installed" in text
    assert "L5 reflection · Kether\n  disabled" in text
    assert "facts 3, observations 2" in text and "episodes 12" in text
    assert f"<peer-card> {block_tokens(card)}" in text
    assert cut.tokens > 1200 >= cut.kept_tokens > 1000
    assert f"cut recalled-episodes {cut.tokens}->{cut.kept_tokens}\n      by layer budget episodic=1200" in text
    assert "pending approvals: 1" in text
    identity = lines.index("L2 identity · Binah")
    assert lines[identity + 2].startswith(f"  last turn: {block_tokens(card)}/800 tokens in ") and lines[
        identity + 2
    ].endswith(" ms")


async def test_layer_views_report_failures_and_other_plugins(make_runtime, stand_ins):
    from thoth_core import ContextBlock, hookimpl

    class Failing:
        LAYER = "episodic"

        @hookimpl
        async def pre_spawn_context(self):
            raise RuntimeError("index is gone")

    class Board:
        @hookimpl
        async def pre_spawn_context(self):
            return ContextBlock(tag="board", text="deploy frozen")

    runtime = make_runtime({"identity": stand_ins["identity"], "failing": Failing(), "board": Board()})
    await runtime.turn("hi", peer="ann", thread="t")
    views = {v.layer: v for v in layer_views(runtime, await runtime.status(peer="ann"))}
    assert list(views) == ["working", "identity", "episodic", "procedural", "reflection", "board"]
    assert views["episodic"].failures == ["failing error"] and views["episodic"].plugins == ["failing"]
    assert views["board"].blocks == [("board", block_tokens(ContextBlock("board", "deploy frozen")))]
    assert views["identity"].counts == {"facts": 3, "observations": 2}


async def test_panel_and_layers_command_agree_and_show_other_plugins_under_their_own_name(make_app, stand_ins, send):
    from thoth_core import hookimpl

    class Blackboard:
        LAYER = "working"  # its blocks count against L1's budget, its status is its own

        @hookimpl
        async def layer_status(self):
            return {"layer": "working", "signals": 2}

    app = make_app({**stand_ins, "blackboard": Blackboard()}, replies=[{"reply": "ok"}])
    async with app.run_test(size=(120, 60)) as pilot:
        await send(app, pilot, "hello")
        await send(app, pilot, "/layers")
        panel = panel_text(app).splitlines()
        command = [m.text for m in app.query(ChatMessage)][-1].splitlines()[1:]
    titles = [
        "L1 working · Malkuth",
        "L2 identity · Binah",
        "L3 episodic · Chokmah",
        "L4 procedural · Yesod",
        "L5 reflection · Kether",
        "blackboard",
    ]
    assert [line.split("  ")[0] for line in command] == titles
    assert [line.split("  ")[0] for line in panel if line and not line.startswith(" ")][:-1] == titles
    assert "signals" not in command[0] and command[5] == "blackboard  signals 2"
    working = panel.index("L1 working · Malkuth")  # on: the blackboard declares it, shows nothing of its own there
    assert panel[working + 1].startswith("  last turn: 0/1000 tokens")
    assert panel[panel.index("blackboard") + 1] == "  signals 2"


async def test_layers_panel_toggles_and_fits_80_columns(make_app, stand_ins, wait):
    app = make_app(stand_ins)
    async with app.run_test(size=(80, 24)) as pilot:
        panel = app.query_one(LayersPanel)
        assert not panel.has_class("shown")
        await pilot.press("f2")
        await wait(app, pilot)
        assert panel.has_class("shown") and panel.region.right <= 80
        assert "L2 identity" in panel_text(app)
        assert app.query_one("#prompt").region.bottom <= 23


async def test_approving_a_pending_draft(make_app, queue, wait):
    first = queue.add("deploy-checklist", flags=["injection"])
    second = queue.add("release-notes")
    app = make_app({"queue": queue})
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("f3")
        await wait(app, pilot)
        screen = app.screen
        assert isinstance(screen, ApprovalsScreen)
        assert screen.query_one(OptionList).option_count == 2
        meta = str(screen.query_one("#approval-meta").render())
        assert "skill:deploy-checklist" in meta and "flags: ['injection']" in meta and "session: s-123" in meta
        await pilot.press("down")
        await pilot.press("a")
        await wait(app, pilot)
        assert queue.decisions == [(second, "approve", "ann", None)]
        assert screen.query_one(OptionList).option_count == 1
        assert "approved skill:release-notes" in str(screen.query_one("#approval-status").render())
        await pilot.press("e")
        await pilot.pause()  # the edit worker waits for the editor screen, so no wait() here
        editor = app.screen.query_one(TextArea)
        editor.text = "# Steps\n\n1. check twice"
        await pilot.press("ctrl+s")
        await wait(app, pilot)
        assert queue.decisions[-1] == (first, "edit", "ann", "# Steps\n\n1. check twice")
        await pilot.press("x")
        await wait(app, pilot)
        assert queue.decisions[-1] == (first, "reject", "ann", None)
        assert "Nothing is waiting" in str(screen.query_one("#approval-meta").render())
        await pilot.press("escape")
        assert not isinstance(app.screen, ApprovalsScreen)


def test_item_sources_link_to_transcripts(tmp_path):
    from thoth_tui.approvals import describe

    transcript = tmp_path / "working" / "transcripts" / "2026-11-21" / "s-123.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text("{}\n")
    episodes = [f"turn-{i}" for i in range(6)]
    item = {
        "id": "persona:7",
        "kind": "persona",
        "title": "prefers short answers",
        "flags": [],
        "source": {"session": "s-123", "run": "r-1", "episodes": episodes, "missing": None},
    }
    text = describe(item, tmp_path)
    assert text.plain.splitlines() == [
        "persona:7  persona",
        "prefers short answers",
        "session: s-123  transcript",
        "run: r-1",
        "episodes: turn-0, turn-1, turn-2, turn-3 (+2 more)",
    ]
    assert [span.style.link for span in text.spans if getattr(span.style, "link", None)] == [transcript.as_uri()]
    assert "transcript" not in describe({**item, "source": {"session": "s-999"}}, tmp_path).plain


async def test_a_refused_decision_is_shown_and_the_item_stays(make_app, queue, wait):
    item = queue.add("deploy-checklist")
    app = make_app({"queue": queue}, config={"thoth": {"founders": ["bob"]}})
    async with app.run_test() as pilot:
        await pilot.press("f3")
        await wait(app, pilot)
        await pilot.press("a")
        await wait(app, pilot)
        status = str(app.screen.query_one("#approval-status").render())
        assert "ann may not approve skill:deploy-checklist: you may only withdraw" in status
        assert app.screen.query_one(OptionList).option_count == 1
    assert queue.decisions == [] and item in queue.items


CORE_COMMANDS = ["help", "done", "whoami", "layers", "approvals", "approve", "reject", "forget"]


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("/help", "/new - start a new thread"),
        ("/whoami", "peer ann in workspace default, thread t1"),
        ("/layers", "/1200 tokens · episodes 12"),
        ("/approvals", "skill:weekly-report  [skill] skill draft weekly-report"),
        ("/approve skill:weekly-report", "approved skill:weekly-report"),
        ("/reject skill:weekly-report too vague", "rejected skill:weekly-report"),
        ("/forget", "Forgot this thread."),
        ("/recall deploy", "recalled: deploy"),
        ("/done", "Session ended"),
        ("/nonsense", "unknown command /nonsense"),
    ],
)
async def test_each_slash_command(make_app, stand_ins, queue, wait, typed, expected, send):
    queue.add("weekly-report")
    app = make_app({**stand_ins, "queue": queue})
    async with app.run_test() as pilot:
        await send(app, pilot, typed)
        shown = [m.text for m in app.query(ChatMessage)]
        thread = app.thread
    assert any(expected in text for text in shown), shown
    if typed == "/done":
        assert thread != "t1"  # a finished session's conversation continues in a new thread


async def test_plugin_commands_complete_and_are_in_help(make_app, stand_ins, wait):
    app = make_app(stand_ins)
    async with app.run_test() as pilot:
        await pilot.press(*"/rec", "tab")
        assert app.query_one("#prompt").value == "/recall "
        table = app.command_table()
        assert set(CORE_COMMANDS) | {"recall", "new"} <= set(table)


async def test_palette_lists_every_action(make_app, stand_ins, wait):
    app = make_app(stand_ins)
    async with app.run_test(size=(100, 30)) as pilot:
        titles = [title for title, _, _ in app.palette_actions()]
        bound = {b.action for b in app.BINDINGS}
        assert {"New thread", "Layers panel", "Approvals", "Select last message", "Quit"} <= set(titles)
        assert bound == {"new_thread", "toggle_layers", "approvals", "select_last", "quit"}
        assert {f"/{name}" for name in app.command_table()} <= set(titles)
        assert {f"React {kind}" for kind in ("approve", "reject", "remember", "forget", "identity")} <= set(titles)
        system = [command.title for command in app.get_system_commands(app.screen)]
        assert "Theme" in system and "Quit" not in system  # one Quit in the palette: ours
        actions = {title: run for title, _, run in app.palette_actions()}
        await actions["/whoami"]()  # a command without arguments runs at once
        await wait(app, pilot)
        assert "peer ann" in list(app.query(ChatMessage))[-1].text
        actions["/recall"]()  # one that needs arguments is put in the message box
        assert app.query_one("#prompt").value == "/recall "
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"Approvals")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait(app, pilot)
        assert isinstance(app.screen, ApprovalsScreen)


async def test_notices_reach_the_chat_while_the_approvals_view_is_open(make_app, queue, wait):
    app = make_app({"queue": queue}, config={"thoth": {"model": "replay"}})
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("f3")
        await wait(app, pilot)
        item = queue.add("late-draft")
        app.runtime.notify("approval_requested", item_id=item, text="New skill draft: late-draft")
        await app.runtime.drain()
        await pilot.press("f5")
        await wait(app, pilot)
        assert app.screen.query_one(OptionList).option_count == 1
        await pilot.press("escape")
        await wait(app, pilot)
        assert "pending approvals: 1" in panel_text(app)
        notices = [m for m in app.query(ChatMessage) if m.role == "notice"]
        assert notices[-1].item_id == item


async def test_turns_that_went_without_a_layers_context_show_in_red_before_any_turn(make_app, stand_ins):
    from thoth_core import hookimpl

    class Working:
        LAYER = "working"

        @hookimpl
        async def layer_status(self):  # as the working layer counts them, across processes
            return {"layer": "working", "sessions": 2, "turns without context": "identity 8/40 (timeout)"}

    app = make_app({**stand_ins, "working": Working()}, replies=[{"reply": "ok"}])
    async with app.run_test(size=(120, 60)) as pilot:
        await pilot.pause()
        await app.query_one(LayersPanel).refresh_from(app.runtime, peer="ann", workspace="default")
        lines = panel_text(app).splitlines()
        statuses = await app.runtime.status(peer="ann")
    working = lines.index("L1 working · Malkuth")
    assert lines[working + 1 : working + 4] == [
        "  sessions 2",
        "  turns without context: identity",
        "    8/40 (timeout)",
    ]
    body = render(layer_views(app.runtime, statuses), pending=0, has_turn=False)
    alert = body.plain.index("turns without context")
    assert any(span.style == "red" and span.start <= alert < span.end for span in body.spans)
