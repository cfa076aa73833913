"""A context block that timed out or failed is counted where every process sees it: `thoth doctor`, statuses."""

from __future__ import annotations

import asyncio

from thoth_working import plugin as working

from thoth_core import ContextBlock, hookimpl
from thoth_core.doctor import diagnose


class Moody:
    """A layer whose context is slow for `slow` messages and fails for `broken` ones."""

    DEADLINE = 0.3

    @hookimpl
    async def pre_spawn_context(self, turn):
        if "slow" in turn.text:
            await asyncio.sleep(2)
        if "broken" in turn.text:
            raise RuntimeError("index unreadable")
        return ContextBlock(tag="mood", text="calm")


async def doctor_lines(runtime) -> list[str]:
    lines: list[str] = []
    await diagnose(runtime, echo=lines.append)
    return lines


async def test_turns_without_a_plugins_context_are_counted_for_the_next_process(make_runtime, storage_config):
    first = make_runtime({"working": working, "moody": Moody()}, config=storage_config)
    for text in ["hello", "slow one", "fine", "slow two", "broken", "/layers"]:  # a command gathers no context
        await first.turn(text, peer="ann", thread="t")
    await first.aclose()

    later = make_runtime({"working": working}, config=storage_config)  # another process: doctor, a status panel
    assert "BAD moody: 3 of the last 5 turns ran without its context (1 error, 2 timeout)" in await doctor_lines(later)
    [status] = await later.status(peer="bob")
    assert status["turns without context"] == "moody 3/5 (error, timeout)"


async def test_a_replayed_turn_is_counted_once_and_whole_turns_say_so(make_runtime):
    runtime = make_runtime({"working": working, "moody": Moody()})
    result = await runtime.turn("hello", peer="ann", thread="t")
    await runtime.drain()
    working.post_turn_write(turn=result.turn, session=result.session)  # as a replay after a kill would
    assert "ok  context: each of the last 1 turns had every plugin's context" in await doctor_lines(runtime)
    [status] = await runtime.status(peer="ann")
    assert "turns without context" not in status


async def test_only_the_last_turns_are_kept(make_runtime):
    from thoth_working.turn_context import KEPT

    runtime = make_runtime({"working": working})
    log = working.state(runtime).store.context_log
    for n in range(KEPT + 5):
        log.note(f"turn-{n}", float(n), "default", {"identity": "timeout"} if n < 5 else {})
    assert log.recent("default", last=KEPT * 2).turns == KEPT
    assert log.recent("default", last=KEPT * 2).by_plugin == {}  # the five oldest went
