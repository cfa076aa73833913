"""The turn pipeline: context from plugins, isolation of failing and slow plugins, background writes."""

from __future__ import annotations

import asyncio
import threading
import time

from thoth_core import ContextBlock, hookimpl


class Greeter:
    LAYER = "procedural"

    @hookimpl
    def pre_spawn_context(self, turn):
        return ContextBlock(tag="greeting", text=f"Greet {turn.peer} warmly.", stable=True)


class Broken:
    @hookimpl
    def pre_spawn_context(self):
        raise RuntimeError("boom")


class Sleepy:
    """Holds its worker thread until the test lets go (30 s at most): a turn that waited for it would see `finished`."""

    DEADLINE = 0.2

    def __init__(self):
        self.release = threading.Event()
        self.finished = False

    @hookimpl
    def pre_spawn_context(self):
        self.release.wait(30)
        self.finished = True
        return ContextBlock(tag="late", text="too late")


class AsyncSleepy:
    DEADLINE = 0.2

    def __init__(self):
        self.finished = False

    @hookimpl
    async def pre_spawn_context(self):
        await asyncio.sleep(30)
        self.finished = True
        return ContextBlock(tag="late-async", text="too late")


class Recorder:
    def __init__(self):
        self.events = []

    @hookimpl
    async def post_turn_write(self, turn, reply, session):
        await asyncio.sleep(0.05)
        self.events.append(("write", turn.text, reply.text, len(session.history)))

    @hookimpl
    def session_end(self, session, reason):
        self.events.append(("end", reason, len(session.transcript)))


async def test_blocks_are_collected_with_plugin_and_layer(make_runtime):
    runtime = make_runtime({"greeter": Greeter()})
    session = await runtime.session(peer="ann", thread="t")
    from thoth_core import Turn

    assembly = await runtime.context(Turn("hi", "ann", "t"), session)
    [block] = assembly.blocks
    assert (block.plugin, block.layer, block.tag) == ("greeter", "procedural", "greeting")
    assert "Greet ann warmly." in assembly.system


async def test_failing_and_slow_plugins_do_not_stop_the_turn(make_runtime):
    sleepy, async_sleepy = Sleepy(), AsyncSleepy()
    runtime = make_runtime(
        {"greeter": Greeter(), "broken": Broken(), "sleepy": sleepy, "async-sleepy": async_sleepy},
        replies=[{"reply": "Hello Ann"}],
    )
    result = await runtime.turn("hi", peer="ann", thread="t")
    still_running = not sleepy.finished
    sleepy.release.set()
    assert result.reply.text == "Hello Ann"
    assert still_running and not async_sleepy.finished  # the turn went on at the deadline, not when they finished
    assert [b.tag for b in result.assembly.blocks] == ["greeting"]
    status = {c.plugin: c.status for c in result.assembly.calls}
    assert status == {"greeter": "ok", "broken": "error", "sleepy": "timeout", "async-sleepy": "timeout"}


async def test_post_turn_write_runs_after_reply_in_background(make_runtime):
    recorder = Recorder()
    runtime = make_runtime({"recorder": recorder}, replies=[{"reply": "pong"}])
    result = await runtime.turn("ping", peer="ann", thread="t")
    assert result.reply.text == "pong"
    assert recorder.events == []  # not yet: the reply came first
    await runtime.drain()
    assert recorder.events == [("write", "ping", "pong", 2)]


async def test_session_end_fires_once_with_transcript(make_runtime):
    recorder = Recorder()
    runtime = make_runtime({"recorder": recorder})
    await runtime.turn("one", peer="ann", thread="t")
    result = await runtime.turn("/done", peer="ann", thread="t")
    assert "Session ended" in result.reply.text
    await runtime.end_session(result.session, "done")
    await runtime.drain()
    assert [e for e in recorder.events if e[0] == "end"] == [("end", "done", 1)]


async def test_history_is_sent_to_the_model(make_runtime):
    runtime = make_runtime(replies=[{"reply": "r"}])
    await runtime.turn("first", peer="ann", thread="t")
    await runtime.turn("second", peer="ann", thread="t")
    request = runtime.model().requests[-1]
    assert [m.content for m in request.messages] == ["first", "r", "second"]


async def test_idle_sessions_end(make_runtime):
    recorder = Recorder()
    runtime = make_runtime({"recorder": recorder}, config={"thoth": {"idle_minutes": 30}})
    await runtime.turn("one", peer="ann", thread="t")
    ended = await runtime.reap_idle(now=time.time() + 31 * 60)
    await runtime.drain()
    assert len(ended) == 1 and ("end", "idle", 1) in recorder.events


class Tooling:
    def __init__(self):
        self.calls = []

    @hookimpl
    def turn_tools(self, turn, session):
        def lookup(tool_input):
            self.calls.append((session.peer, tool_input))
            return f"looked up {tool_input['q']}"

        return [
            {
                "name": "lookup",
                "description": "look something up",
                "input_schema": {"type": "object"},
                "handler": lookup,
            }
        ]


async def test_tools_reach_the_request_and_calls_land_in_the_transcript(make_runtime):
    tooling = Tooling()
    runtime = make_runtime({"tooling": tooling}, replies=[{"reply": "ok"}])
    await runtime.turn("hi", peer="ann", thread="t")
    [tool] = [tool for tool in runtime.model().requests[-1].tools if tool["name"] == "lookup"]
    assert await tool["handler"]({"q": "otters"}) == "looked up otters"
    session = await runtime.session(peer="ann", thread="t")
    assert tooling.calls == [("ann", {"q": "otters"})]
    assert session.transcript[-1] | {"at": 0} == {
        "type": "tool",
        "turn_id": session.transcript[0]["turn_id"],
        "at": 0,
        "plugin": "tooling",
        "name": "lookup",
        "input": {"q": "otters"},
        "output": "looked up otters",
    }


class HungWriter:
    def __init__(self):
        self.finished = False

    @hookimpl
    async def post_turn_write(self):
        await asyncio.sleep(60)
        self.finished = True


async def test_a_hung_background_write_is_cut_off_at_its_deadline(make_runtime):
    hung = HungWriter()
    runtime = make_runtime(
        {"hung": hung, "recorder": Recorder()}, config={"plugins": {"hung": {"background_deadline": 0.2}}}
    )
    await runtime.turn("hi", peer="ann", thread="t")
    await runtime.drain()
    assert not hung.finished  # drained at the 0.2 s deadline, not after the write's 60 s
    assert runtime.pm.get_plugin("recorder").events[0][0] == "write"


class CheckIns:
    def __init__(self):
        self.pending = [{"at": 100.0, "thread": "t", "text": "How did the deploy go?"}]

    @hookimpl
    def due_check_ins(self, now):
        due = [c for c in self.pending if c["at"] <= now]
        self.pending = [c for c in self.pending if c["at"] > now]
        return due


async def test_due_check_ins_are_gathered_once_and_call_isolates_each_plugin(make_runtime):
    runtime = make_runtime({"checkins": CheckIns(), "broken": Broken()})
    assert await runtime.due_check_ins(50.0) == []
    assert [c["text"] for c in await runtime.due_check_ins(150.0)] == ["How did the deploy go?"]
    assert await runtime.due_check_ins(200.0) == []
    outcomes = await runtime.call("pre_spawn_context", turn=None, session=None)
    assert [(plugin, call.status) for plugin, _, call in outcomes] == [("broken", "error")]


class PerPeerCheckIns:
    """Honours `accept`: hands out only accepted check-ins and keeps the rest."""

    def __init__(self):
        self.pending = [{"at": 1.0, "peer": "ann", "text": "for ann"}, {"at": 1.0, "peer": "bob", "text": "for bob"}]

    @hookimpl
    def due_check_ins(self, now, accept):
        due = [c for c in self.pending if c["at"] <= now and accept(c)]
        self.pending = [c for c in self.pending if c not in due]
        return due


async def test_due_check_ins_go_only_to_the_frontend_that_accepts_them(make_runtime):
    honest, ignoring = PerPeerCheckIns(), CheckIns()
    runtime = make_runtime({"per_peer": honest, "ignoring": ignoring})
    for_ann = await runtime.due_check_ins(150.0, accept=lambda item: item.get("peer") == "ann")
    assert [c["text"] for c in for_ann] == ["for ann"]  # the impl ignoring `accept` has its item dropped
    assert [c["text"] for c in honest.pending] == ["for bob"]  # kept for its own frontend
    assert [c["text"] for c in await runtime.due_check_ins(150.0)] == ["for bob"]


async def test_a_turn_result_carries_its_turn(make_runtime):
    runtime = make_runtime(replies=[{"reply": "hello"}])
    result = await runtime.turn("hi", peer="ann", thread="t")
    assert result.turn.text == "hi" and result.turn.id == result.session.transcript[-1]["turn_id"]
    command = await runtime.turn("/help", peer="ann", thread="t")
    assert command.reply.model == "command" and command.turn.text == "/help"
