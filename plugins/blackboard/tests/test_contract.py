"""The contract every blackboard backend keeps; runs on the in-process, the SQLite and the Redis board."""

from __future__ import annotations

import asyncio

import pytest
from thoth_blackboard import BoardError


async def collect(subscription, n, timeout=5.0):
    got = []

    async def read():
        async for signal in subscription:
            got.append(signal)
            if len(got) == n:
                return

    await asyncio.wait_for(read(), timeout)
    return got


async def test_publish_then_get(board):
    first = await board.publish("task:1:status", "running", publisher="scribe")
    second = await board.publish("task:1:status", "done", publisher="scribe")
    current = await board.get("task:1:status")
    assert (current.value, current.publisher) == ("done", "scribe")
    assert first.id != second.id
    assert await board.get("task:2:status") is None


async def test_list_by_prefix_is_sorted(board):
    for key in ("task:2:a", "task:1:b", "index:status", "task:1:a"):
        await board.publish(key, key.upper())
    assert [s.key for s in await board.list("task:1:")] == ["task:1:a", "task:1:b"]
    assert len(await board.list()) == 4


async def test_subscribers_get_later_matching_updates_in_order(board):
    await board.publish("task:7:status", "before")
    exact = await board.subscribe("task:7:status")
    prefix = await board.subscribe("task:7:*")
    await board.publish("task:8:status", "other task")
    await board.publish("task:7:status", "one")
    await board.publish("task:7:log", "two")
    await board.publish("task:7:status", "three")
    assert [s.value for s in await collect(exact, 2)] == ["one", "three"]
    assert [s.value for s in await collect(prefix, 3)] == ["one", "two", "three"]
    await exact.close()
    await prefix.close()


async def test_a_subscriber_that_was_away_catches_up(board):
    subscription = await board.subscribe("agent:scribe:*")
    await board.publish("agent:scribe:status", "a")
    [seen] = await collect(subscription, 1)
    await subscription.close()
    await board.publish("agent:scribe:status", "b")
    await board.publish("agent:scribe:status", "c")
    resumed = await board.subscribe("agent:scribe:*", after=subscription.last_id)
    assert seen.value == "a"
    assert [s.value for s in await collect(resumed, 2)] == ["b", "c"]
    await resumed.close()


async def test_a_slow_subscriber_never_blocks_publishers(board):
    idle = await board.subscribe("load:*")  # subscribed, never read

    async def publish_all():
        for i in range(2000):
            await board.publish(f"load:{i}", "x" * 100)

    await asyncio.wait_for(publish_all(), 20)
    assert len(await board.list("load:")) == 2000
    reader = await board.subscribe("load:*", after=idle.last_id)
    assert len(await collect(reader, 2000, timeout=20)) == 2000
    await idle.close()
    await reader.close()


@pytest.mark.parametrize("key", ["", "has space", "a::b", "wild:*", "x" * 300])
async def test_bad_keys_are_refused(board, key):
    with pytest.raises(BoardError, match="bad blackboard key"):
        await board.publish(key, "v")


async def test_values_are_size_limited(board):
    with pytest.raises(BoardError, match="limit is 65536"):
        await board.publish("big", "x" * 70_000)
    await board.publish("ok", "x" * 60_000)


async def test_clear(board):
    await board.publish("a", "1")
    await board.publish("b", "2")
    assert await board.clear() == 2
    assert await board.list() == []
