"""The TUI over the real first-party layers (skipped where a layer is not installed)."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList
from thoth_tui.approvals import ApprovalsScreen
from thoth_tui.chat import ChatMessage

from thoth_core.budget import block_tokens


def installed(module: str):
    return pytest.importorskip(module, reason=f"{module} is not installed")


def last_text(app) -> str:
    return list(app.query(ChatMessage))[-1].text


async def test_approving_a_real_skill_draft_then_using_it(make_app, tmp_path, wait, send):
    procedural = installed("thoth_procedural.plugin")
    drafts = installed("thoth_procedural.drafts")
    app = make_app({"procedural": procedural}, root=tmp_path)
    drafts.write_draft(
        app.runtime,
        name="weekly-report",
        description="Write the weekly report from the board",
        body="1. read the board\n2. summarise",
        source={"session_id": "s-1", "run_id": "r-1"},
        flags=[],
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f3")
        await wait(app, pilot)
        assert isinstance(app.screen, ApprovalsScreen)
        assert "skill:weekly-report" in str(app.screen.query_one("#approval-meta").render())
        await pilot.press("a")
        await wait(app, pilot)
        assert app.screen.query_one(OptionList).option_count == 0
        skill = tmp_path / ".claude" / "skills" / "weekly-report" / "SKILL.md"
        assert skill.exists() and "summarise" in skill.read_text()
        assert not (tmp_path / ".claude" / "skill-drafts" / "weekly-report").exists()

        await pilot.press("escape")
        await send(app, pilot, "/skills")
        assert "weekly-report" in last_text(app)
        await send(app, pilot, "/skill weekly-report")
        assert "weekly-report" in last_text(app) and "failed" not in last_text(app)
        await send(app, pilot, "write this week's report")
        procedural = [b for b in app.runtime.last.assembly.blocks if b.layer == "procedural"]
        assert any("summarise" in b.text for b in procedural)  # the loaded skill reached the context
        panel = str(app.query_one("#layers-body").render())
        assert all(f"<{b.tag}> {block_tokens(b)}" in panel for b in procedural)


async def test_board_command(make_app, tmp_path, send):
    board = installed("thoth_blackboard.plugin")
    app = make_app({"blackboard": board}, root=tmp_path)
    async with app.run_test() as pilot:
        await send(app, pilot, "/board put deploy frozen")
        assert "published deploy = frozen" in last_text(app)
        await send(app, pilot, "/board ls")
        assert last_text(app) == "deploy = frozen"


async def test_layer_commands_and_reactions(make_app, tmp_path, wait, send):
    plugins = {name: installed(f"thoth_{name}.plugin") for name in ("identity", "episodic", "procedural")}
    app = make_app(plugins, root=tmp_path, replies=[{"reply": "Noted: you like green tea."}])
    async with app.run_test(size=(120, 40)) as pilot:
        await send(app, pilot, "/remember my name is Ada")
        assert "Ada" in last_text(app) and "failed" not in last_text(app)
        await send(app, pilot, "/skills")
        assert "failed" not in last_text(app)
        await send(app, pilot, "I like green tea")
        await app.runtime.drain()
        await send(app, pilot, "/recall tea")
        assert "green tea" in last_text(app)
        await pilot.press("ctrl+o", "up", "up")  # the assistant's reply to "I like green tea"
        selected = app.focused
        assert selected.role == "assistant"
        await pilot.press("f")
        await wait(app, pilot)
        assert "forgot the episode of turn" in last_text(app)
        status = {s["layer"]: s for s in await app.runtime.status(peer="ann")}
        assert status["episodic"]["episodes"] == 0
        layers = str(app.query_one("#layers-body").render())
        assert "L2 identity · Binah" in layers and "L5 reflection · Kether\n  not installed" in layers


async def test_a_reflection_draft_arrives_as_a_notice_and_is_approved_with_a_key(make_app, tmp_path, wait):
    procedural = installed("thoth_procedural.plugin")
    from thoth_core._calls import call_each

    app = make_app({"procedural": procedural}, root=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait(app, pilot)
        result = {
            "run_id": "r-7",
            "session_id": app.session.id,
            "what_worked": [],
            "what_didnt": [],
            "skill": {"name": "standup-notes", "description": "Summarise the standup", "body": "1. list blockers"},
            "memory_notes": [],
            "persona_observations": [],
            "next_check_at": None,
            "user_model_updates": {},
            "flags": {},
        }
        await call_each(app.runtime.pm, "reflection_result", {"result": result, "session": app.session})
        await app.runtime.drain()
        await pilot.pause()
        notice = list(app.query(ChatMessage))[-1]
        assert notice.item_id.startswith("skill:standup-notes--")  # ann's draft: keyed by its owner
        assert "Reflection drafted a new skill" in notice.text
        assert "pending approvals: 1" in str(app.query_one("#layers-body").render())
        await pilot.press("ctrl+o", "a")
        await wait(app, pilot)
        assert notice.reactions == ["approve"]
        assert "pending approvals: 0" in str(app.query_one("#layers-body").render())
    assert (tmp_path / ".claude" / "skills" / "standup-notes" / "SKILL.md").exists()


async def test_a_restart_without_a_thread_reopens_the_last_thread_and_shows_its_messages(make_app, tmp_path, send):
    working = installed("thoth_working.plugin")
    replies = [{"match": "boat", "reply": "The boat leaves at **nine**."}, {"reply": "Bring a coat."}]
    first = make_app({"working": working}, thread=None, root=tmp_path, replies=replies)
    async with first.run_test(size=(100, 40)) as pilot:
        assert first.thread == "tui"  # nothing to reopen yet
        await pilot.press("ctrl+n")
        await pilot.pause()
        thread = first.thread
        assert thread.startswith("tui-")
        await send(first, pilot, "when does the boat leave?")
        await send(first, pilot, "and the weather?")
        await pilot.press("ctrl+q")
        await pilot.pause()

    second = make_app({"working": working}, thread=None, root=tmp_path)
    async with second.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        assert second.thread == thread and thread in second.sub_title
        shown = [(m.role, m.text) for m in second.query(ChatMessage) if m.role != "notice"]
        assert shown == [
            ("user", "when does the boat leave?"),
            ("assistant", "The boat leaves at **nine**."),
            ("user", "and the weather?"),
            ("assistant", "Bring a coat."),
        ]
        turn_ids = [m.turn_id for m in second.query(ChatMessage) if m.role == "assistant"]
        assert all(turn_ids) and len(set(turn_ids)) == 2  # reactions on them reach the right turns
        assert [m.content for m in second.session.history][-1] == "Bring a coat."
