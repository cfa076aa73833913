"""Pilot tests of the chat: streaming, loading indicator, banners, history, completion, threads, feedback."""

from __future__ import annotations

import io

from rich.console import Console
from thoth_tui.chat import ChatMessage
from thoth_tui.prompt import Prompt


def messages(app, role=None):
    return [m for m in app.query(ChatMessage) if role is None or m.role == role]


async def test_reply_streams_as_markdown(make_app, wait, send):
    app = make_app(replies=[{"match": "hello", "reply": "Hi **Ann**, here is a list:\n\n- one\n- two"}])
    async with app.run_test(size=(80, 24)) as pilot:
        await send(app, pilot, "hello")
        [user] = messages(app, "user")
        [reply] = messages(app, "assistant")
        assert user.text == "hello"
        assert reply.text == "Hi **Ann**, here is a list:\n\n- one\n- two"
        assert reply.turn_id and reply.turn_id == user.turn_id
        assert not reply.loading
        console = Console(width=60, record=True, file=io.StringIO())
        console.print(reply.query_one(".body").content)  # the finished reply: one static Markdown render
        assert [line.rstrip() for line in console.export_text().splitlines()[:3]] == [
            "Hi Ann, here is a list:",
            "",
            " • one",
        ]
        assert app.session.history[-1].content == reply.text


async def test_loading_indicator_until_the_first_token(make_app, gate, wait):
    app = make_app({"gate": gate}, config={"thoth": {"model": "gated"}})
    async with app.run_test() as pilot:
        app.query_one(Prompt).value = "are you there"
        await pilot.press("enter")
        await pilot.pause()
        [reply] = messages(app, "assistant")
        assert reply.loading and reply.text == ""
        await pilot.press(*"typing")
        assert app.query_one(Prompt).value == "typing"
        gate.model.release.set()
        await wait(app, pilot)
        assert not reply.loading
        assert reply.text == "**Done** waiting."


async def test_missing_model_shows_a_banner_with_the_fix(make_app, wait, send):
    app = make_app(config={"thoth": {"model": ""}})
    async with app.run_test() as pilot:
        await wait(app, pilot)
        banner = app.query_one("#banner")
        assert banner.has_class("shown")
        assert "ANTHROPIC_API_KEY" in str(banner.render())
        await send(app, pilot, "/whoami")
        assert "peer ann" in messages(app, "command")[-1].text
        await send(app, pilot, "hello")
        assert messages(app, "assistant") == []
        assert "no model is configured" in messages(app, "error")[-1].text


async def test_input_history_and_command_completion(make_app, wait):
    app = make_app(replies=[{"reply": "ok"}])
    async with app.run_test() as pilot:
        prompt = app.query_one(Prompt)
        for text in ("first", "second"):
            await pilot.press(*text, "enter")
            await wait(app, pilot)
        await pilot.press("up")
        assert prompt.value == "second"
        await pilot.press("up", "up")
        assert prompt.value == "first"
        await pilot.press("down")
        assert prompt.value == "second"
        await pilot.press("down")
        assert prompt.value == ""
        await pilot.press(*"/who")
        await pilot.pause()
        completions = app.query_one("#completions")
        assert completions.display and "/whoami" in str(completions.render())
        await pilot.press("tab")
        assert prompt.value == "/whoami "
        await pilot.press("enter")
        await wait(app, pilot)
        assert "thread t1" in messages(app, "command")[-1].text
    assert (app.runtime.home / "tui" / "history" / "ann.txt").read_text().splitlines() == ["first", "second", "/whoami"]


async def test_each_peer_has_its_own_history_and_forget_deletes_it(make_app, wait):
    from thoth_tui import plugin as tui_plugin

    app = make_app(peer="ann/../bob", replies=[{"reply": "ok"}])
    async with app.run_test() as pilot:
        await pilot.press(*"mine", "enter")
        await wait(app, pilot)
        runtime = app.runtime
        path = runtime.home / "tui" / "history" / "ann%2F..%2Fbob.txt"  # a safe file name, inside history/
        assert path.read_text() == "mine\n" and sorted(p.name for p in path.parent.iterdir()) == [path.name]
        other = await tui_plugin.forget(peer="bob", thread=None, runtime=runtime)
        assert other is None and path.exists()
        receipt = await runtime.forget(peer="ann/../bob")
        assert receipt["tui"] == {"input history lines": 1} and not path.exists()
        await pilot.press("up")
        assert app.query_one(Prompt).value == ""  # the running app forgot it too


async def test_new_thread_by_key_and_by_command(make_app, sessions, wait, send):
    app = make_app({"sessions": sessions}, replies=[{"reply": "ok"}])
    async with app.run_test() as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+n")
        await wait(app, pilot)
        second = app.thread
        assert second != "t1" and messages(app, "user") == []
        await send(app, pilot, "/new")
        assert app.thread not in ("t1", second)
        await app.runtime.drain()
        assert sessions.ended == [("t1", "new"), (second, "new")]
        assert app.sub_title.startswith(f"ann · thread {app.thread}")


async def test_quit_ends_the_session(make_app, sessions, wait, send):
    app = make_app({"sessions": sessions}, replies=[{"reply": "ok"}])
    async with app.run_test() as pilot:
        await send(app, pilot, "hi")
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert sessions.ended == [("t1", "exit")]


async def test_feedback_keys_on_a_selected_message(make_app, recorder, wait, send):
    app = make_app({"recorder": recorder}, replies=[{"reply": "Paris is the capital."}])
    async with app.run_test() as pilot:
        await send(app, pilot, "capital of France?")
        [reply] = messages(app, "assistant")
        await pilot.press("ctrl+o")
        assert app.focused is reply
        for key in "rfi":
            await pilot.press(key)
            await wait(app, pilot)
        await pilot.press("up")
        assert app.focused is messages(app, "user")[0]
        await pilot.press("a")
        await wait(app, pilot)
        notices = [m.text for m in messages(app, "notice")]
    kinds = [(c["kind"], c["turn_id"], c["text"]) for c in recorder.calls]
    assert kinds == [
        ("remember", reply.turn_id, "Paris is the capital."),
        ("forget", reply.turn_id, "Paris is the capital."),
        ("identity", reply.turn_id, "Paris is the capital."),
        ("approve", reply.turn_id, "capital of France?"),
    ]
    assert {c["actor"] for c in recorder.calls} == {"ann"}
    assert reply.reactions == ["remember", "forget", "identity"]
    assert ":brain: noted remember" in notices


async def test_notifications_show_and_their_items_can_be_approved(make_app, queue, wait):
    item = queue.add("deploy-checklist")
    app = make_app({"queue": queue})
    async with app.run_test() as pilot:
        app.runtime.notify("approval_requested", item_id=item, text="New skill draft: deploy-checklist")
        await app.runtime.drain()
        await pilot.pause()
        notice = messages(app, "notice")[-1]
        assert notice.item_id == item and "deploy-checklist" in notice.text
        await pilot.press("ctrl+o", "a")
        await wait(app, pilot)
        assert "approved skill:deploy-checklist" in messages(app, "notice")[-1].text
        assert notice.reactions == ["approve"]
    assert queue.decisions == [(item, "approve", "ann", None)]


async def test_a_model_that_fails_shows_the_failure_banner(make_app, wait, send):
    class Broken:
        name = "broken"

        async def stream(self, request):
            raise ConnectionError("connection refused")
            yield ""

    class Provider:
        from thoth_core import hookimpl

        @hookimpl
        def register_models(self, register):
            register("broken", lambda runtime, options: Broken())

    app = make_app({"provider": Provider()}, config={"thoth": {"model": "broken"}})
    async with app.run_test() as pilot:
        await wait(app, pilot)
        assert not app.query_one("#banner").has_class("shown")
        await send(app, pilot, "hello")
        banner = str(app.query_one("#banner").render())
        assert "Model failed: model broken failed: ConnectionError: connection refused" in banner
        assert "thoth doctor" in banner
        assert messages(app, "assistant") == []


async def test_every_minute_idle_sessions_end_and_check_ins_show(make_app, sessions, wait):
    from thoth_core import hookimpl

    class CheckIns:
        def __init__(self):
            self.due = [
                {"workspace": "default", "peer": "ann", "thread": "t1", "text": "How did the deploy go?"},
                {"workspace": "default", "peer": "bob", "thread": "t1", "text": "Bob's check-in"},
                {"workspace": "T1", "peer": "ann", "thread": "C1:1.2", "text": "a Slack workspace's"},
            ]

        @hookimpl
        async def due_check_ins(self, now, accept):
            taken = [c for c in self.due if accept(c)]
            self.due = [c for c in self.due if c not in taken]
            return taken

    check_ins = CheckIns()
    app = make_app({"sessions": sessions, "check-ins": check_ins}, config={"thoth": {"idle_minutes": 0.0001}})
    async with app.run_test() as pilot:
        await wait(app, pilot)
        app.session.last_active -= 60
        await app.tick()
        await app.runtime.drain()
        await pilot.pause()
        assert sessions.ended == [("t1", "idle")]
        assert "check_in: How did the deploy go?" in messages(app, "notice")[-1].text
        await app.tick()
        assert len([m for m in messages(app, "notice") if "deploy" in m.text]) == 1
        assert not [m for m in messages(app, "notice") if "Bob" in m.text or "Slack" in m.text]
        assert [c["text"] for c in check_ins.due] == ["Bob's check-in", "a Slack workspace's"]  # left for others


async def test_a_provider_that_cannot_be_built_is_a_banner_not_a_crash(make_app, wait, send):
    from thoth_core import hookimpl

    class Provider:
        @hookimpl
        def register_models(self, register):
            def build(runtime, options):
                raise RuntimeError("libfoo missing")

            register("fragile", build)

    app = make_app({"provider": Provider()}, config={"thoth": {"model": "fragile"}})
    async with app.run_test() as pilot:
        await wait(app, pilot)
        assert "Model problem: RuntimeError: libfoo missing" in str(app.query_one("#banner").render())
        await send(app, pilot, "hello")
        assert "RuntimeError: libfoo missing" in messages(app, "error")[-1].text
        await send(app, pilot, "/whoami")
        assert "peer ann" in messages(app, "command")[-1].text


async def test_without_a_thread_the_app_asks_the_runtime_for_the_last_one(make_app):
    from thoth_core import hookimpl

    class Sessions:
        @hookimpl
        def last_thread(self, peer, workspace):
            return {"thread": f"{peer}-{workspace}-last", "last_active": 1.0}

    app = make_app({"sessions": Sessions()}, thread=None)
    async with app.run_test() as pilot:
        await pilot.pause()
        assert app.thread == app.session.thread == "ann-default-last"
    named = make_app({"sessions": Sessions()}, thread="mine")
    async with named.run_test() as pilot:
        await pilot.pause()
        assert named.thread == "mine"


async def test_a_turn_a_layer_could_not_save_is_a_visible_warning(make_app, wait, send):
    from thoth_core import hookimpl

    class FullDisk:
        LAYER = "episodic"

        @hookimpl
        async def post_turn_write(self, turn):
            raise OSError(28, "No space left on device")

    app = make_app({"episodic": FullDisk()}, replies=[{"match": "hello", "reply": "Hi."}])
    async with app.run_test(notifications=True) as pilot:
        await send(app, pilot, "hello")
        await app.runtime.drain()
        await pilot.pause()
        expected = (
            "Not saved yet: episodic (OSError: [Errno 28] No space left on device); "
            "kept in the journal and retried at the next start."
        )
        assert messages(app, "notice")[-1].text == expected
        await pilot.pause()
        [toast] = app.screen.query("Toast")  # the toast (Textual's widget, selected by name)
        assert toast.has_class("-warning") and expected in str(toast.render())


async def test_unsaved_turns_of_other_peers_are_not_shown_and_other_threads_are_named(make_app, wait):
    app = make_app()
    async with app.run_test() as pilot:
        await wait(app, pilot)
        failed = {"identity": "OperationalError: database is locked"}
        app.runtime.notify("turn_unsaved", turn_id="t-9", peer="U0BOB", thread="C1:1.2", failed=failed)
        app.runtime.notify("turn_unsaved", turn_id="t-8", peer="ann", thread="old", failed=failed)
        await app.runtime.drain()
        await pilot.pause()
        unsaved = [m.text for m in messages(app, "notice") if "Not saved yet" in m.text]
        assert unsaved == [
            "Not saved yet (thread old): identity (OperationalError: database is locked); "
            "kept in the journal and retried at the next start."
        ]


async def test_replies_and_notices_show_without_escape_sequences(make_app, wait, send):
    reply_text = "title \x1b]0;pwned\x07 clear \x1b[2J c1 \x9b31m end\r\nline \x1b]52;c;aGk=\x1b\\two"
    app = make_app(replies=[{"match": "esc", "reply": reply_text}])
    async with app.run_test(size=(80, 24)) as pilot:
        await send(app, pilot, "esc \x1b]0;pwned\x07 x")
        [user] = messages(app, "user")
        [reply] = messages(app, "assistant")
        assert user.text == "esc  x"
        assert reply.text == "title  clear  c1  end\nline two"  # streamed word by word, each sequence removed whole
        app.runtime.notify("approval_requested", text="remembered \x1b]0;pwned\x07 note")
        await app.runtime.drain()
        await pilot.pause()
        assert messages(app, "notice")[-1].text == "approval_requested: remembered  note"
        console = Console(width=60, record=True, file=io.StringIO())
        console.print(reply.query_one(".body").content)
        assert "\x1b" not in console.export_text() and "pwned" not in console.export_text()
