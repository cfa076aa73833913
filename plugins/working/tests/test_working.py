"""L1 working memory: continuity across restarts, idle timeout, transcripts, trimming, MEMORY.md, scratch."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest
from thoth_working import plugin as working
from thoth_working import record_tool, scratch, transcript_path
from thoth_working.state import Settings

from thoth_core import ConfigError, ModelError, Session, hookimpl
from thoth_core.budget import block_tokens, trim_history
from thoth_core.journal import Entry
from thoth_core.testing import check_layer_plugin, context_for
from thoth_core.types import CUT_SHORT, Reply, Turn


class BrokenModel:
    name = "broken"

    async def stream(self, request):
        raise RuntimeError("upstream 529 overloaded")
        yield ""  # pragma: no cover - makes this an async generator


class BrokenProvider:
    @hookimpl
    def register_models(self, register):
        register("broken", lambda runtime, options: BrokenModel())


@pytest.fixture(params=["sqlite", "postgres"])
def dialect(request):
    """Where the store lives: SQLite files in the home, or the shared PostgreSQL (`[storage] url`)."""
    return request.param


@pytest.fixture
def runtime_at(make_runtime, tmp_path, dialect, request):
    """Runtimes sharing one THOTH_HOME (and store) and project root, as successive processes would."""
    storage = {"storage": {"url": request.getfixturevalue("storage_url")}} if dialect == "postgres" else {}
    made = []

    def make(config=None, **kwargs):
        runtime = make_runtime({"working": working}, root=tmp_path, config={**storage, **(config or {})}, **kwargs)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        runtime.writes.close()  # its journal (and, with PostgreSQL, the writer lock's connection)


def lines_of(runtime, session):
    return working.state(runtime).store.entries(session.id, session.started_at)


async def test_session_continues_after_a_restart(runtime_at):
    first = runtime_at(replies=[{"match": "first", "reply": "one"}, {"reply": "two"}])
    result = await first.turn("first", peer="ann", thread="slack-C1-171")
    session_id = result.session.id
    await first.end_session(result.session, "exit")  # the frontend shut down
    await first.aclose()

    second = runtime_at(replies=[{"reply": "two"}])
    result = await second.turn("second", peer="ann", thread="slack-C1-171")
    await second.drain()
    assert result.session.id == session_id
    assert [m.content for m in second.model().requests[-1].messages] == ["first", "one", "second"]
    types = [(e["type"], e.get("resumed")) for e in lines_of(second, result.session)]
    assert types == [
        ("session_start", None),
        ("turn", None),
        ("session_end", None),
        ("session_start", True),
        ("turn", None),
    ]


async def test_a_crashed_process_is_continued_too_but_not_other_threads(runtime_at):
    first = runtime_at(replies=[{"reply": "noted"}])
    result = await first.turn("my flight is at 9", peer="ann", thread="t1")
    await first.drain()  # no end_session: the process died
    second = runtime_at()
    resumed = await second.session(peer="ann", thread="t1")
    other = await second.session(peer="ann", thread="t2")
    stranger = await second.session(peer="bob", thread="t1")
    assert resumed.id == result.session.id and [m.content for m in resumed.history] == ["my flight is at 9", "noted"]
    assert other.history == [] and stranger.history == [] and other.id != resumed.id


async def test_the_last_active_thread_of_a_peer_survives_a_restart(runtime_at):
    first = runtime_at()
    assert await first.last_thread(peer="ann") is None
    for thread in ("t1", "t2", "t1"):
        await first.turn(f"hello in {thread}", peer="ann", thread=thread)
    await first.turn("hello", peer="bob", thread="bobs")
    await first.turn("hello", peer="ann", thread="elsewhere", workspace="other")
    await first.drain()
    assert await first.last_thread(peer="ann") == "t1"
    await first.turn("again", peer="ann", thread="t2")
    await first.aclose()
    second = runtime_at()
    assert await second.last_thread(peer="ann") == "t2"
    assert await second.last_thread(peer="ann", workspace="other") == "elsewhere"
    assert await second.last_thread(peer="bob") == "bobs"
    assert working.last_thread(peer="carl", workspace="default", runtime=second) is None
    await second.forget(peer="ann", thread="t2")
    assert await second.last_thread(peer="ann") == "t1"


async def test_done_starts_the_thread_afresh_in_this_and_the_next_process(runtime_at):
    runtime = runtime_at()
    before = (await runtime.turn("hello", peer="ann", thread="t")).session
    await runtime.turn("/done", peer="ann", thread="t")
    after = (await runtime.turn("again", peer="ann", thread="t")).session
    await runtime.drain()
    assert after.id != before.id and [m.content for m in after.history] == ["again", "ok"]
    last = lines_of(runtime, before)[-1]
    assert (last["type"], last["reason"]) == ("session_end", "done")
    await runtime.aclose()
    restarted = runtime_at()
    assert (await restarted.session(peer="ann", thread="t")).id == after.id  # the open one, not the closed one


async def test_idle_timeout_fires_session_end_and_closes_the_session(runtime_at):
    runtime = runtime_at(config={"thoth": {"idle_minutes": 30}})
    old = (await runtime.turn("one", peer="ann", thread="t")).session
    await runtime.drain()
    assert await runtime.reap_idle(now=time.time() + 29 * 60) == []
    ended = await runtime.reap_idle(now=time.time() + 31 * 60)
    await runtime.drain()
    assert ended == [old] and old.ended
    last = lines_of(runtime, old)[-1]
    assert (last["type"], last["reason"], last["session_id"]) == ("session_end", "idle", old.id)
    assert working.state(runtime).store.get(old.id).closed == "idle"
    fresh = await runtime.session(peer="ann", thread="t")
    assert fresh.id != old.id and fresh.history == []


async def test_a_session_idle_past_the_limit_is_not_resumed_after_a_restart(runtime_at):
    first = runtime_at()
    old = (await first.turn("one", peer="ann", thread="t")).session
    await first.drain()
    store = working.state(first).store
    store._db.execute("UPDATE sessions SET last_active = last_active - 3600 WHERE session_id = ?", (old.id,))
    await first.aclose()
    second = runtime_at(config={"thoth": {"idle_minutes": 30}})
    fresh = await second.session(peer="ann", thread="t")
    assert fresh.id != old.id and fresh.history == []
    assert working.state(second).store.get(old.id).closed == "expired"  # set aside for a reaper, not ended silently
    await second.reap_idle()  # as a frontend's reaper or `thoth reflect idle` does
    await second.drain()
    assert working.state(second).store.get(old.id).closed == "idle"  # ended (and reflected)
    last = lines_of(second, old)[-1]
    assert (last["type"], last["reason"]) == ("session_end", "idle")


class EndCounter:
    """Counts session_end calls by session id."""

    def __init__(self):
        self.ended = []

    @hookimpl
    def session_end(self, session, reason):
        self.ended.append((session.id, reason, [e["user"] for e in session.transcript if e["type"] == "turn"]))


async def test_a_session_an_exited_process_left_is_ended_once_by_two_reapers_at_once(runtime_at):
    gone = runtime_at()
    old = (await gone.turn("one", peer="ann", thread="t")).session
    await gone.drain()
    await gone.aclose()  # like `thoth ask`: the process exits without ending its session
    reapers = [runtime_at(config={"thoth": {"idle_minutes": 30}}) for _ in range(2)]
    counters = [EndCounter(), EndCounter()]
    for reaper, counter in zip(reapers, counters, strict=True):
        reaper.register(counter, name="counter")
    assert [await r.reap_idle() for r in reapers] == [[], []]  # not idle yet
    later = time.time() + 31 * 60
    first, second = await asyncio.gather(*(r.reap_idle(now=later) for r in reapers))
    for reaper in reapers:
        await reaper.drain()
    assert sorted([s.id for s in first + second]) == [old.id]
    assert sorted(e for c in counters for e in c.ended) == [(old.id, "idle", ["one"])]
    assert working.state(reapers[0]).store.get(old.id).closed == "idle"
    assert [e["type"] for e in lines_of(reapers[0], old)].count("session_end") == 1
    assert [await r.reap_idle(now=later) for r in reapers] == [[], []]


async def test_a_stale_session_of_a_key_opened_later_is_reaped_not_expired_and_the_live_one_stays(runtime_at):
    gone = runtime_at()
    old = (await gone.turn("one", peer="ann", thread="t")).session
    await gone.drain()
    await gone.aclose()
    running = runtime_at(config={"thoth": {"idle_minutes": 30}})
    await running.session(peer="bob", thread="x")  # its first session: nothing is idle yet
    working.state(running).store._db.execute(
        "UPDATE sessions SET last_active = last_active - 3600 WHERE session_id = ?", (old.id,)
    )
    fresh = await running.session(peer="ann", thread="t")  # a long-running process opens the stale key
    assert fresh.id != old.id and working.state(running).store.get(old.id).closed == "expired"
    [ended] = await running.reap_idle()
    await running.drain()
    assert ended.id == old.id and [e["user"] for e in ended.transcript if e["type"] == "turn"] == ["one"]
    assert running.sessions[("default", "ann", "t")] is fresh and not fresh.ended
    assert working.state(running).store.get(old.id).closed == "idle"


async def test_a_session_another_runtime_holds_and_used_lately_is_not_taken(runtime_at):
    holder = runtime_at(config={"thoth": {"idle_minutes": 30}})
    held = (await holder.turn("one", peer="ann", thread="t")).session
    await holder.drain()
    other = runtime_at(config={"thoth": {"idle_minutes": 30}})
    assert await other.reap_idle() == []
    assert working.state(other).store.get(held.id).closed is None and not held.ended
    assert await holder.reap_idle(now=time.time() + 31 * 60) == [held]  # its own reaper still ends it


async def test_transcript_lines_carry_the_contract_fields(runtime_at, dialect):
    runtime = runtime_at(replies=[{"reply": "Paris."}])
    result = await runtime.turn("Capital of France?", peer="ann", thread="t", workspace="acme")
    record_tool(result.session, name="search", input={"q": "france"}, output="Paris is the capital")
    await runtime.end_session(result.session, "done")
    await runtime.drain()
    path = transcript_path(runtime.home / "working", result.session.id, result.session.started_at)
    if dialect == "sqlite":
        day = time.strftime("%Y-%m-%d", time.gmtime(result.session.started_at))
        assert path.parent.name == day and path.parent.parent == runtime.home / "working" / "transcripts"
        assert [json.loads(line) for line in path.read_text().splitlines()] == lines_of(runtime, result.session)
    else:
        assert not (runtime.home / "working").exists()  # the shared store holds index and transcripts
    start, turn, tool, end = lines_of(runtime, result.session)
    common = {"session_id": result.session.id, "workspace": "acme", "peer": "ann", "thread": "t"}
    for entry in (start, turn, tool, end):
        assert entry.items() >= common.items() and isinstance(entry["at"], float)
    assert turn["type"] == "turn" and (turn["user"], turn["assistant"], turn["model"]) == (
        "Capital of France?",
        "Paris.",
        "replay",
    )
    assert turn["turn_id"] and turn["error"] is None
    assert (tool["type"], tool["name"], tool["input"], tool["output"]) == (
        "tool",
        "search",
        {"q": "france"},
        "Paris is the capital",
    )
    assert (end["type"], end["reason"]) == ("session_end", "done")


async def test_model_errors_reach_the_transcript(runtime_at):
    runtime = runtime_at(config={"thoth": {"model": "broken"}})
    runtime.register(BrokenProvider(), name="broken-provider")
    with pytest.raises(ModelError):
        await runtime.turn("will this fail?", peer="ann", thread="t")
    session = await runtime.session(peer="ann", thread="t")
    await runtime.end_session(session, "exit")
    await runtime.drain()
    [start, error, end] = lines_of(runtime, session)
    assert (start["type"], end["type"]) == ("session_start", "session_end")
    assert error["type"] == "error" and error["user"] == "will this fail?" and "529 overloaded" in error["error"]
    assert error["session_id"] == session.id and error["peer"] == "ann"


async def test_a_post_turn_write_that_runs_after_the_end_stores_nothing_twice(runtime_at):
    runtime = runtime_at(config={"thoth": {"model": "broken"}})
    runtime.register(BrokenProvider(), name="broken-provider")
    with pytest.raises(ModelError):
        await runtime.turn("will this fail?", peer="ann", thread="t")
    session = await runtime.session(peer="ann", thread="t")
    store = working.state(runtime).store
    store.end(session, "exit", resumable=True)  # the end ran first, the failed turn's write flushes late
    store.flush(session)
    assert [e["type"] for e in lines_of(runtime, session)] == ["session_start", "error", "session_end"]


async def test_an_error_is_written_at_the_next_turn_without_waiting_for_the_end(runtime_at):
    runtime = runtime_at(config={"thoth": {"model": "broken"}})
    runtime.register(BrokenProvider(), name="broken-provider")
    with pytest.raises(ModelError):
        await runtime.turn("first try", peer="ann", thread="t")
    session = await runtime.session(peer="ann", thread="t")
    await context_for(runtime, "second try", peer="ann", thread="t")
    assert [e["type"] for e in lines_of(runtime, session)] == ["session_start", "error"]


async def test_a_failed_turns_error_is_written_when_the_runtime_closes(runtime_at):
    runtime = runtime_at(config={"thoth": {"model": "broken"}})
    runtime.register(BrokenProvider(), name="broken-provider")
    with pytest.raises(ModelError):
        await runtime.turn("one shot", peer="ann", thread="t")  # `thoth ask`: one turn, then the process ends
    session = await runtime.session(peer="ann", thread="t")
    await runtime.aclose()
    [start, error] = lines_of(runtime, session)
    assert start["type"] == "session_start" and error["type"] == "error" and error["user"] == "one shot"


async def test_a_resumed_session_gets_its_transcript_back_without_writing_it_twice(runtime_at):
    first = runtime_at(replies=[{"reply": "noted"}])
    await first.turn("my flight is at 9", peer="ann", thread="t")
    await first.turn("and the hotel is booked", peer="ann", thread="t")
    await first.aclose()

    second = runtime_at(replies=[{"reply": "ok"}])
    session = await second.session(peer="ann", thread="t")
    assert [(e["type"], e["user"]) for e in session.transcript] == [
        ("turn", "my flight is at 9"),
        ("turn", "and the hotel is booked"),
    ]
    assert "session_id" not in session.transcript[0] and session.transcript[0]["assistant"] == "noted"
    await second.turn("what time is my flight?", peer="ann", thread="t")
    await second.end_session(session, "done")
    await second.drain()
    users = [e["user"] for e in lines_of(second, session) if e["type"] == "turn"]
    assert users == ["my flight is at 9", "and the hotel is booked", "what time is my flight?"]
    assert [e["user"] for e in session.transcript] == users


@pytest.mark.parametrize("dialect", ["sqlite"])  # no store involved
async def test_memory_shows_untagged_lines_and_only_the_peers_own_tagged_ones(runtime_at, tmp_path):
    memory = tmp_path / "persona" / "MEMORY.md"
    memory.parent.mkdir()
    memory.write_text(
        "# Memory\n- The team ships on Thursdays.\n"
        "- [2026-03-01] The user's codeword is zebra-42. <!-- peer:alice ws:default -->\n"
        "- [2026-03-01] Carol's desk is by the window. <!-- peer:carol ws:other -->\n"
    )
    runtime = runtime_at()
    alice = await context_for(runtime, "hi", peer="alice", thread="t")
    bob = await context_for(runtime, "hi", peer="bob", thread="t")
    assert "zebra-42" in alice.system and "<!--" not in alice.system and "Thursdays" in alice.system
    assert "zebra-42" not in bob.system and "Thursdays" in bob.system
    assert "window" not in alice.system + bob.system


async def test_history_is_trimmed_to_the_budget_by_the_core(runtime_at):
    first = runtime_at(replies=[{"reply": "a fairly long answer " * 5}])
    for i in range(8):
        await first.turn(f"question number {i} with several words in it", peer="ann", thread="t")
    await first.drain()
    full = list((await first.session(peer="ann", thread="t")).history)
    await first.aclose()

    second = runtime_at(config={"budget": {"history": 120}}, replies=[{"reply": "ok"}])
    await second.turn("and now?", peer="ann", thread="t")
    sent = second.model().requests[-1].messages
    assert len((await second.session(peer="ann", thread="t")).history) == 18  # all of it restored
    assert sent[:-1] == trim_history(full, 120) and 0 < len(sent) - 1 < len(full)
    assert sent[0].role == "user" and sent[-1].content == "and now?"


@pytest.mark.parametrize("dialect", ["sqlite"])  # no store involved
async def test_memory_file_is_read_once_per_session_start(runtime_at, tmp_path):
    memory = tmp_path / "persona" / "MEMORY.md"
    memory.parent.mkdir()
    memory.write_text("# Memory\n- The team ships on Thursdays.\n")
    runtime = runtime_at()
    first = await context_for(runtime, "hi", peer="ann", thread="t")
    [block] = [b for b in first.blocks if b.plugin == "working"]
    assert (block.tag, block.stable, block.layer) == ("memory", True, "working") and "Thursdays" in block.text
    memory.write_text("# Memory\n- The team ships on Fridays.\n")
    same_session = await context_for(runtime, "hi", peer="ann", thread="t")
    new_session = await context_for(runtime, "hi", peer="ann", thread="other")
    assert "Thursdays" in [b for b in same_session.blocks if b.plugin == "working"][0].text
    assert "Fridays" in [b for b in new_session.blocks if b.plugin == "working"][0].text


@pytest.mark.parametrize("dialect", ["sqlite"])  # no store involved
async def test_memory_over_budget_keeps_the_newest_lines(runtime_at, tmp_path):
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "MEMORY.md").write_text("\n".join(f"- note {i} about the project" for i in range(60)))
    runtime = runtime_at(config={"budget": {"layers": {"working": 60}}})
    assembly = await context_for(runtime, "hi", peer="ann", thread="t")
    [block] = [b for b in assembly.blocks if b.plugin == "working"]
    assert block.text.endswith("note 59 about the project") and "note 0 about" not in block.text
    assert block_tokens(block) <= 60 and not assembly.cuts


@pytest.mark.parametrize("dialect", ["sqlite"])  # no store involved
async def test_no_memory_file_means_no_block_and_unreadable_is_a_clear_error(runtime_at, tmp_path, caplog):
    runtime = runtime_at()
    assert not [b for b in (await context_for(runtime, "hi", peer="ann", thread="t")).blocks if b.plugin == "working"]
    (tmp_path / "persona" / "MEMORY.md").mkdir(parents=True)  # a folder where the file should be
    with caplog.at_level(logging.ERROR):
        await runtime.session(peer="ann", thread="t2")
    assert any("persona/MEMORY.md: cannot read the auto-memory file" in r.getMessage() for r in caplog.records)


def test_bad_settings_name_the_key(make_runtime):
    runtime = make_runtime(config={"plugins": {"working": {"restore_turns": -1}}})
    with pytest.raises(ConfigError, match=r"plugins\.working\.restore_turns: expected a non-negative integer"):
        Settings.of(runtime)


@pytest.mark.parametrize("dialect", ["sqlite"])  # no store involved
async def test_scratch_store_set_get_list_clear(runtime_at):
    runtime = runtime_at()
    session = await runtime.session(peer="ann", thread="t")
    pad = scratch(session)
    pad.set("episodic.query", "deploy")
    pad.set("episodic.hits", [1, 2])
    pad.set("tool.cwd", "/srv")
    assert pad.get("episodic.query") == "deploy" and pad.get("missing", 7) == 7
    assert pad.list() == ["episodic.hits", "episodic.query", "tool.cwd"] and pad.list("episodic.") == [
        "episodic.hits",
        "episodic.query",
    ]
    assert pad.clear("episodic.") == 2 and pad.list() == ["tool.cwd"]
    assert scratch(session).get("tool.cwd") == "/srv"  # the same store, seen from another caller
    assert pad.clear() == 1 and len(pad) == 0
    with pytest.raises(TypeError):
        pad.set(3, "x")  # type: ignore[arg-type]


async def test_forget_deletes_sessions_and_transcripts(runtime_at, dialect):
    runtime = runtime_at()
    kept = (await runtime.turn("hi", peer="bob", thread="t")).session
    for thread in ("t1", "t2"):
        await runtime.turn("hi", peer="ann", thread=thread)
    await runtime.drain()
    one = await runtime.forget(peer="ann", thread="t1")
    assert one["working"] == {"sessions": 1, "transcripts": 1}
    assert await runtime.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 1, "plugin": "working"}]
    rest = await runtime.forget(peer="ann")
    assert rest["working"] == {"sessions": 1, "transcripts": 1}
    store = working.state(runtime).store
    assert [s.session_id for s in store.every()] == [kept.id] and lines_of(runtime, kept)
    if dialect == "sqlite":
        remaining = [p.stem for p in (runtime.home / "working" / "transcripts").glob("*/*.jsonl")]
        assert remaining == [kept.id]
    else:
        assert store._db.execute("SELECT DISTINCT session_id FROM transcript_entries").fetchall() == [(kept.id,)]
    assert await runtime.forget(peer="ann") == {}


async def test_hooks_called_directly(runtime_at):
    runtime = runtime_at()
    session = Session("default", "ann", "t", runtime=runtime)
    working.session_start(session=session)
    assert working.pre_spawn_context(turn=Turn("hi", "ann", "t"), session=session) is None
    session.transcript.append(
        {"type": "turn", "turn_id": "x1", "at": 1.0, "user": "u", "assistant": "a", "model": "m", "error": None}
    )
    turn = Turn("u", "ann", "t", id="x1")
    working.post_turn_write(turn=turn, session=session)
    working.post_turn_write(turn=turn, session=session)  # nothing new: nothing written twice
    working.session_end(session=session, reason="done")
    assert [e["type"] for e in lines_of(runtime, session)] == ["session_start", "turn", "session_end"]
    assert working.layer_status(workspace="default", peer="ann", runtime=runtime) == {
        "layer": "working",
        "sessions": 1,
        "turns": 1,
    }
    assert working.forget(peer="ann", thread=None, workspace="default", runtime=runtime) == {
        "sessions": 1,
        "transcripts": 1,
    }


async def test_a_replayed_turn_already_written_is_not_written_or_counted_twice(runtime_at):
    runtime = runtime_at(replies=[{"reply": "noted"}])
    result = await runtime.turn("my flight is at 9", peer="ann", thread="t")
    await runtime.drain()
    stand_in = Entry(result.turn, result.reply, result.session.id, result.session.started_at, ["working"]).session(
        runtime
    )
    working.post_turn_write(turn=result.turn, session=stand_in)  # the write was done; the kill came before
    working.post_turn_write(turn=result.turn, session=stand_in)  # the journal knew
    turns = [e for e in lines_of(runtime, result.session) if e["type"] == "turn"]
    assert [e["turn_id"] for e in turns] == [result.turn.id]
    assert await runtime.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 1, "plugin": "working"}]
    await runtime.turn("and the hotel?", peer="ann", thread="t")  # the live session goes on writing
    await runtime.aclose()
    assert [e["user"] for e in lines_of(runtime, result.session) if e["type"] == "turn"] == [
        "my flight is at 9",
        "and the hotel?",
    ]

    restarted = runtime_at()  # as the recovery at the next start sees it: no session open yet
    stand_in = Entry(result.turn, result.reply, result.session.id, result.session.started_at, ["working"]).session(
        restarted
    )
    working.post_turn_write(turn=result.turn, session=stand_in)
    working.post_turn_write(turn=result.turn, session=stand_in)
    assert len([e for e in lines_of(restarted, result.session) if e["type"] == "turn"]) == 2
    assert await restarted.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 2, "plugin": "working"}]


@pytest.mark.parametrize("dialect", ["sqlite"])  # a half-written line is a file's matter
async def test_a_replay_after_a_kill_mid_line_starts_a_line_of_its_own(runtime_at):
    runtime = runtime_at()
    session = await runtime.session(peer="ann", thread="t")
    path = transcript_path(runtime.home / "working", session.id, session.started_at)
    path.parent.mkdir(parents=True)
    path.write_text('{"type": "session_start", "at": 1.0}\n{"type": "turn", "turn_id": "half')
    turn = Turn("my flight is at 9", "ann", "t", id="turn-1")
    stand_in = Entry(turn, Reply("noted"), session.id, session.started_at, []).session(runtime)
    working.post_turn_write(turn=turn, session=stand_in)
    assert [(e["type"], e.get("turn_id")) for e in lines_of(runtime, session)] == [
        ("session_start", None),
        ("turn", "turn-1"),
    ]


async def test_recovery_through_the_runtime_keeps_one_copy_and_the_resumed_session_has_the_turn(runtime_at):
    first = runtime_at(replies=[{"reply": "noted"}])
    written = await first.turn("my flight is at 9", peer="ann", thread="t")
    await first.drain()
    # Killed after the transcript got the turn, before the journal struck it off:
    first.journal.append(written.turn, written.reply, written.session, ["working"])
    # and a second turn the working layer never wrote at all:
    lost = Turn("the hotel is booked", "ann", "t", id="turn-lost")
    first.journal.append(lost, Reply("noted too"), written.session, ["working"])
    await first.aclose()

    second = runtime_at(replies=[{"reply": "ok"}])
    resumed = await second.session(peer="ann", thread="t")  # replays the journal, then resumes
    assert second.journal.pending() == []
    assert resumed.id == written.session.id
    assert [m.content for m in resumed.history] == ["my flight is at 9", "noted", "the hotel is booked", "noted too"]
    await second.turn("when is my flight?", peer="ann", thread="t")
    await second.drain()
    turns = [e["turn_id"] for e in lines_of(second, resumed) if e["type"] == "turn"]
    assert turns == [written.turn.id, "turn-lost", second.last.turn.id]
    assert await second.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 3, "plugin": "working"}]


async def test_conformance(runtime_at):
    await check_layer_plugin(runtime_at(), "working")


async def test_a_turn_kept_cut_short_and_run_again_keeps_one_whole_turn_entry(runtime_at):
    first = runtime_at(replies=[{"reply": "one"}])
    written = await first.turn("first", peer="ann", thread="t")
    await first.drain()
    again = Turn("plan my trip", "ann", "t", id="turn-again")  # killed mid-stream: the journal holds it cut short
    first.journal.append(again, Reply.cut("Day one: Oslo"), written.session, ["working"])
    await first.aclose()

    second = runtime_at(replies=[{"reply": "Day one: Oslo. Day two: Bergen."}])
    resumed = await second.session(peer="ann", thread="t")  # replays the cut-short turn, then resumes
    assert resumed.id == written.session.id and resumed.history[-1].content.endswith(CUT_SHORT)
    rerun = await second.turn("plan my trip", peer="ann", thread="t", turn_id="turn-again")  # another worker's re-run
    await second.drain()
    # the model was not shown the message answered already, and the live session holds it once
    assert [m.content for m in second.model().requests[-1].messages] == ["first", "one", "plan my trip"]
    assert [m.content for m in rerun.session.history] == [
        "first",
        "one",
        "plan my trip",
        "Day one: Oslo. Day two: Bergen.",
    ]
    stand_in = Entry(again, Reply.cut("Day one: Oslo"), written.session.id, written.session.started_at, []).session(
        second
    )
    working.post_turn_write(turn=again, session=stand_in)  # replayed again: a cut-short version replaces nothing
    await second.aclose()

    third = runtime_at()
    turns = [e for e in lines_of(third, resumed) if e["type"] == "turn"]
    assert [(e["turn_id"], e["assistant"], e.get("cut_short")) for e in turns] == [
        (written.turn.id, "one", None),
        ("turn-again", "Day one: Oslo. Day two: Bergen.", None),
    ]
    assert await third.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 2, "plugin": "working"}]
    restored = await third.session(peer="ann", thread="t")
    assert [m.content for m in restored.history][-2:] == ["plan my trip", "Day one: Oslo. Day two: Bergen."]
