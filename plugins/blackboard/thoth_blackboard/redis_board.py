"""The Redis board: a stream as the log, a hash of current values, shared by processes and hosts.

Publishing is one MULTI of XADD (the log, capped at `keep` entries) and HSET (the current
value). A subscription reads the stream with XREAD from the last id it delivered; when the
connection drops it reconnects and resumes from that id, so it catches up on everything it
missed. With `persist = false` the board's keys expire `ttl` seconds after the last publish
(session-lived); with Redis persistence (AOF/RDB) on, a persistent board survives a restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any, cast

from .board import BoardError, Signal, check, matches

logger = logging.getLogger(__name__)

_PUBLISH = """
local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[5], '*',
  'key', ARGV[1], 'value', ARGV[2], 'publisher', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], cjson.encode({key=ARGV[1], value=ARGV[2], publisher=ARGV[3], id=id, at=ARGV[4]}))
if tonumber(ARGV[6]) > 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[6])
  redis.call('EXPIRE', KEYS[2], ARGV[6])
end
return id
"""


class RedisBoard:
    """A blackboard in Redis under one namespace (e.g. `thoth:board:default`)."""

    def __init__(
        self, url: str, *, namespace: str = "thoth:board:default", keep: int = 100_000, ttl: int | None = 86_400
    ) -> None:
        import redis.asyncio as redis

        self.url, self.namespace, self.keep, self.ttl = url, namespace, keep, ttl
        self.client = redis.Redis.from_url(url, decode_responses=True, socket_connect_timeout=2, socket_timeout=5)
        self.stream, self.hash = f"{namespace}:log", f"{namespace}:values"
        self._publish = self.client.register_script(_PUBLISH)

    async def _call(self, what: str, coro: Any) -> Any:
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        try:
            return await coro
        except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
            raise BoardError(f"blackboard: cannot {what} at {self.url}: {exc}") from exc

    async def publish(self, key: str, value: str, *, publisher: str | None = None) -> Signal:
        """Append to the log and set the current value, atomically, in one round trip."""
        check(key, value)
        at = time.time()
        args: list[str | float] = [key, value, publisher or "", at, self.keep, self.ttl or 0]
        signal_id = await self._call("publish", self._publish(keys=[self.stream, self.hash], args=args))
        return Signal(key, value, publisher, signal_id, at)

    async def get(self, key: str) -> Signal | None:
        """The current value of a key."""
        raw = await self._call("read", self.client.hget(self.hash, key))
        return _signal(raw) if raw else None

    async def list(self, prefix: str = "") -> list[Signal]:
        """Current values of every key starting with prefix, sorted by key."""

        async def scan() -> list[Signal]:
            return [
                _signal(raw) async for _, raw in self.client.hscan_iter(self.hash, match=f"{_glob_escape(prefix)}*")
            ]

        return sorted(await self._call("list", scan()), key=lambda s: s.key)

    async def subscribe(self, pattern: str, *, after: str | None = None) -> RedisSubscription:
        """Every later signal whose key matches pattern (or after a given id)."""
        if after is None:
            info = (
                await self._call("subscribe", self.client.xinfo_stream(self.stream))
                if await self._call("subscribe", self.client.exists(self.stream))
                else None
            )
            after = info["last-generated-id"] if info else "0-0"
        return RedisSubscription(self, pattern, after)

    async def clear(self) -> int:
        """Delete the board's values and log; returns how many keys there were."""
        count = await self._call("clear", self.client.hlen(self.hash))
        await self._call("clear", self.client.delete(self.hash, self.stream))
        return int(count)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


class RedisSubscription:
    """A reader of the board's stream that resumes from its last id after a disconnect."""

    def __init__(self, board: RedisBoard, pattern: str, after: str) -> None:
        self.board, self.pattern, self.last_id = board, pattern, after
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[Signal]:  # type: ignore[override]
        from redis.exceptions import ConnectionError as RedisConnectionError
        from redis.exceptions import TimeoutError as RedisTimeoutError

        delay = 0.05
        while not self.closed:
            try:
                reply = await self.board.client.xread({self.board.stream: self.last_id}, block=200, count=500)
                batches = cast("list[Any]", reply)  # RESP2, the client's protocol: [[stream, entries]]
                delay = 0.05
            except (RedisConnectionError, RedisTimeoutError, OSError) as exc:
                logger.warning("blackboard subscription %s: %s; reconnecting from %s", self.pattern, exc, self.last_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            for _, entries in batches:
                for entry_id, fields in entries:
                    self.last_id = entry_id
                    if matches(fields["key"], self.pattern):
                        yield Signal(fields["key"], fields["value"], fields["publisher"] or None, entry_id)

    async def close(self) -> None:
        """Stop after the current read."""
        self.closed = True


def _signal(raw: str) -> Signal:
    data = json.loads(raw)
    return Signal(data["key"], data["value"], data["publisher"] or None, data["id"], float(data["at"]))


def _glob_escape(text: str) -> str:
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
