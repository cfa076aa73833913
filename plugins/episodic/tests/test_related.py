"""Related episodes on every turn (`related_every_turn`): on, off, never twice, within budget and deadline."""

from __future__ import annotations

import time

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.records import Episode
from thoth_episodic.related import SHOWN_KEY, related_block

from thoth_core import ConfigError, Turn, count_tokens

DAY = 86400.0
FACTS = [
    "My daughter Lea starts school in Porto next week.",
    "Lea's school bag is red with a fox on it.",
    "Lea is nervous about her school teacher.",
    "The school bus for Lea leaves at seven.",
    "I prefer tea to coffee.",
    "The car needs new tyres.",
]


async def seeded(make_runtime, **episodic):
    runtime = make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"related_k": 2, **episodic}}})
    for text in FACTS:
        await runtime.turn(text, peer="ann", thread="old")
    await runtime.drain()
    return runtime


def episodic_lines(result) -> list[str]:
    return [line for b in result.assembly.blocks if b.plugin == "episodic" for line in b.text.splitlines()]


async def test_off_by_default_only_the_first_turn_gets_related_episodes(make_runtime):
    runtime = await seeded(make_runtime)
    assert memory_for(runtime).settings.related_every_turn is False
    first = await runtime.turn("How will Lea's school day go?", peer="ann", thread="new")
    assert len(episodic_lines(first)) == 2
    second = await runtime.turn("What about Lea's school bus?", peer="ann", thread="new")
    assert episodic_lines(second) == []


async def test_on_every_turn_gets_related_episodes_it_was_not_shown_yet(make_runtime):
    runtime = await seeded(make_runtime, related_every_turn=True)
    first = await runtime.turn("How will Lea's school day go?", peer="ann", thread="new")
    second = await runtime.turn("What about Lea's school?", peer="ann", thread="new")
    third = await runtime.turn("Anything else about Lea's school?", peer="ann", thread="new")
    lines = [episodic_lines(r) for r in (first, second, third)]
    assert [len(x) for x in lines] == [2, 2, 2]
    shown = [line for x in lines for line in x]
    assert len(shown) == len(set(shown))  # never twice in one session
    assert all("thread old" in line for line in shown)  # not this thread's own turns: the history has them
    assert sum("Lea" in line for line in shown) == 4  # all four Lea episodes, two per turn
    session = third.session
    assert len(session.scratch[SHOWN_KEY]) == len(shown)


async def test_a_new_session_may_be_shown_the_same_episodes_again(make_runtime):
    runtime = await seeded(make_runtime, related_every_turn=True)
    one = await runtime.turn("Lea's school bag?", peer="ann", thread="a")
    two = await runtime.turn("Lea's school bag?", peer="ann", thread="b")
    [bag] = [line for line in episodic_lines(one) if "bag is red" in line]
    assert bag in episodic_lines(two)


async def test_only_the_lines_that_fit_the_layer_budget_are_offered_and_counted_as_shown(make_runtime):
    runtime = make_runtime(
        {"episodic": plugin},
        config={
            "plugins": {"episodic": {"related_k": 3, "related_every_turn": True}},
            "budget": {"layers": {"episodic": 80}},
        },
    )
    for text in FACTS[:4]:
        await runtime.turn(text + " " + "More words about the school day. " * 2, peer="ann", thread="old")
    await runtime.drain()
    first = await runtime.turn("Lea's school?", peer="ann", thread="new")
    [block] = [b for b in first.assembly.blocks if b.plugin == "episodic"]
    assert len(block.text.splitlines()) == 1 and count_tokens(block.render()) <= 80
    assert first.assembly.cuts == []  # nothing the core had to cut: the block was made to fit
    assert len(first.session.scratch[SHOWN_KEY]) == 1  # the ones left out may come next turn
    second = await runtime.turn("Lea's school again?", peer="ann", thread="new")
    [line] = [b.text for b in second.assembly.blocks if b.plugin == "episodic"]
    assert line != block.text


async def test_a_recall_past_the_deadline_counts_nothing_as_shown(make_runtime, monkeypatch):
    runtime = await seeded(make_runtime, related_every_turn=True, deadline=0.05)
    memory = memory_for(runtime)
    real = memory.recall

    def slow(*args, **kwargs):
        time.sleep(0.1)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory, "recall", slow)
    session = await runtime.session(peer="ann", thread="new")
    assert related_block(memory, Turn("Lea's school?", "ann", "new", "default"), session) is None
    assert session.scratch[SHOWN_KEY] == []


async def test_related_every_turn_must_be_true_or_false(make_runtime):
    with pytest.raises(ConfigError, match=r"plugins\.episodic\.related_every_turn.*'yes'"):
        make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"related_every_turn": "yes"}}})


async def test_a_given_before_is_honoured_so_nightly_now_reaches_retention(make_runtime):
    runtime = make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {"retention_days": 30}}})
    memory = memory_for(runtime)
    at = time.time() - 2 * DAY
    fresh = Episode(workspace="default", peer="ann", thread="t", user="fresh news", occurred_at=at, recorded_at=at)
    memory.write_many([fresh])
    assert plugin.expiring_records(before=time.time() - 30 * DAY, runtime=runtime) == []
    later = time.time() + 60 * DAY  # `thoth reflect nightly --now` two months ahead
    [record] = plugin.expiring_records(before=later - 30 * DAY, runtime=runtime)
    assert record["id"] == fresh.id and record["text"] == "fresh news" and record["peer"] == "ann"
    assert memory.cutoff(before=later - 30 * DAY) == later - 30 * DAY
    assert memory.cutoff() == pytest.approx(time.time() - 30 * DAY, abs=5)
