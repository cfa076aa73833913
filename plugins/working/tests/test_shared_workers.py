"""Several workers on one shared store (`[storage] url`): a thread's turns may go to any of them."""

from __future__ import annotations

import pytest
from thoth_working import plugin as working

from thoth_core.testing import make_test_runtime


def workers(tmp_path, storage_url, count=2):
    """Runtimes with homes of their own (as on other hosts) sharing one PostgreSQL."""
    made = []
    for number in range(count):
        home = tmp_path / f"host-{number}"
        home.mkdir()
        config = {"storage": {"url": storage_url}}
        made.append(make_test_runtime(home, {"working": working}, config=config, replies=[{"reply": f"w{number}"}]))
    return made


async def test_two_workers_answer_one_thread_in_turn_and_each_sees_the_whole_history(tmp_path, storage_url):
    one, two = workers(tmp_path, storage_url)
    asked = []
    try:
        for number, (runtime, text) in enumerate(
            [(one, "my flight is at 9"), (two, "the hotel is booked"), (one, "a taxi at 7"), (two, "what is planned?")]
        ):
            result = await runtime.turn(text, peer="ann", thread="slack-C1-171")
            await runtime.drain()  # the turn is stored before the next message arrives
            asked.append([m.content for m in runtime.model().requests[-1].messages])
            assert len(asked[-1]) == 2 * number + 1
        assert asked[-1] == [
            "my flight is at 9", "w0", "the hotel is booked", "w1", "a taxi at 7", "w0", "what is planned?"
        ]  # fmt: skip
        assert asked[2] == asked[-1][:5]  # the first worker saw the second one's turn
        session = result.session
        stored = working.state(one).store.entries(session.id, session.started_at)
        turns = [e["user"] for e in stored if e["type"] == "turn"]
        assert turns == ["my flight is at 9", "the hotel is booked", "a taxi at 7", "what is planned?"]
        assert await one.status(peer="ann") == [{"layer": "working", "sessions": 1, "turns": 4, "plugin": "working"}]
        errors_and_tools = [e for e in stored if e["type"] not in ("turn", "session_start")]
        assert errors_and_tools == []  # nothing stored twice by a catch-up
    finally:
        for runtime in (one, two):
            await runtime.aclose()
    for number in range(2):
        home = tmp_path / f"host-{number}"
        assert not (home / "working").exists() and not (home / "journal.db").exists()


async def test_a_thread_ended_by_one_worker_is_reaped_once_and_its_transcript_stays_whole(tmp_path, storage_url):
    one, two = workers(tmp_path, storage_url)
    try:
        first = (await one.turn("one", peer="ann", thread="t")).session
        await one.drain()
        await two.turn("two", peer="ann", thread="t")
        await two.drain()
        await one.aclose()  # the first worker exits; the second reaps what it left
        later = first.last_active + 31 * 60
        working.state(two).live.clear()
        two.sessions.clear()
        [reaped] = await two.reap_idle(now=later)
        await two.drain()
        assert reaped.id == first.id and [e["user"] for e in reaped.transcript if e["type"] == "turn"] == ["one", "two"]
        stored = working.state(two).store.entries(first.id, first.started_at)
        assert [e["type"] for e in stored].count("session_end") == 1 and stored[-1]["reason"] == "idle"
    finally:
        await two.aclose()


async def test_a_session_one_worker_ended_is_not_continued_by_another(tmp_path, storage_url):
    one, two = workers(tmp_path, storage_url)
    try:
        old = (await one.turn("the old topic", peer="ann", thread="t")).session
        await one.drain()
        assert (await two.turn("more on it", peer="ann", thread="t")).session.id == old.id
        await two.drain()
        await one.end_session(one.sessions[old.key], "done")  # e.g. /new on the first worker
        await one.drain()
        fresh = (await two.turn("a new topic", peer="ann", thread="t")).session
        await two.drain()
        assert fresh.id != old.id and old.ended
        assert [m.content for m in two.model().requests[-1].messages] == ["a new topic"]
        assert (await one.turn("and then", peer="ann", thread="t")).session.id == fresh.id  # resumed, not a third
        assert [m.content for m in one.model().requests[-1].messages] == ["a new topic", "w1", "and then"]
        ended = [e for e in working.state(one).store.entries(old.id, old.started_at) if e["type"] == "session_end"]
        assert len(ended) == 1  # the second worker did not end it again
    finally:
        for runtime in (one, two):
            await runtime.aclose()


async def test_a_worker_does_not_reap_a_session_another_worker_is_still_answering(tmp_path, storage_url):
    one, two = workers(tmp_path, storage_url)
    try:
        held = (await one.turn("first", peer="ann", thread="t")).session
        await one.drain()
        later = (await two.turn("second", peer="ann", thread="t")).session
        later.last_active = held.last_active + 25 * 60  # the second worker answered 25 minutes on
        working.state(two).store.flush(later)
        assert await one.reap_idle(now=held.last_active + 31 * 60) == []  # idle here, but not in the store
        assert one.sessions[held.key] is held and not held.ended
        assert [s.id for s in await one.reap_idle(now=held.last_active + 56 * 60)] == [held.id]
    finally:
        for runtime in (one, two):
            await runtime.aclose()


@pytest.mark.parametrize("source", ["sqlite", "postgres"])
async def test_a_bundle_carries_sessions_and_transcripts_between_the_dialects(tmp_path, storage_url, source):
    shared = {"storage": {"url": storage_url}}
    configs = {"sqlite": {}, "postgres": shared}
    target = "postgres" if source == "sqlite" else "sqlite"
    homes = {name: tmp_path / name for name in configs}
    runtimes = {
        name: make_test_runtime(homes[name], {"working": working}, config=configs[name], replies=[{"reply": "ok"}])
        for name in configs
    }
    try:
        origin = runtimes[source]
        kept = (await origin.turn("my flight is at 9", peer="ann", thread="t")).session
        await origin.turn("the hotel is booked", peer="ann", thread="t")
        await origin.end_session(kept, "done")
        await origin.drain()
        section = working.bundle_export(runtime=origin)
        section["records"] = list(section["records"])
        progress = []
        added = working.bundle_import(section=section, runtime=runtimes[target], progress=progress.append)
        assert added == {"sessions": 1, "transcripts": 1} and progress == [1]
        again = working.bundle_import(section=section, runtime=runtimes[target], progress=progress.append)
        assert again == {"sessions": 0, "transcripts": 0}
        stores = {name: working.state(runtime).store for name, runtime in runtimes.items()}
        assert stores[target].every() == stores[source].every()
        entries = {name: store.entries(kept.id, kept.started_at) for name, store in stores.items()}
        assert entries[target] == entries[source] and [e["type"] for e in entries[target]] == [
            "session_start", "turn", "turn", "session_end"
        ]  # fmt: skip
    finally:
        for runtime in runtimes.values():
            await runtime.aclose()
