"""The blackboard contract: publish, query, list by prefix, subscribe with catch-up.

Keys are strings such as `task:{id}:result`, `agent:{id}:status`, `index:status`. Every
publish gets an increasing id; a subscription remembers the last id it delivered, so a
subscriber that was away resumes from there and misses nothing (as long as the board's
log still holds it). Publishers never wait for subscribers.
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Protocol

from thoth_core import ThothError

MAX_KEY_LENGTH = 256
MAX_VALUE_BYTES = 64 * 1024
_KEY = re.compile(r"^[A-Za-z0-9_.\-]+(:[A-Za-z0-9_.\-*]+)*$")


class BoardError(ThothError):
    """A bad key or value, or a board that cannot be reached."""


@dataclass(frozen=True)
class Signal:
    """One published value: key, value, who published it, its id in the board's log."""

    key: str
    value: str
    publisher: str | None = None
    id: str = ""
    at: float = field(default_factory=time.time)


def check(key: str, value: str | None = None) -> None:
    """Reject keys and values the board will not store, with a one-line reason."""
    if not key or len(key) > MAX_KEY_LENGTH or not _KEY.match(key) or "*" in key:
        raise BoardError(f"bad blackboard key {key!r}: use segments of letters, digits, _ . - joined by ':'")
    if value is not None and len(value.encode()) > MAX_VALUE_BYTES:
        raise BoardError(f"value for {key!r} is {len(value.encode())} bytes; the limit is {MAX_VALUE_BYTES}")


def matches(key: str, pattern: str) -> bool:
    """A pattern is an exact key, or a prefix ending in `*` (`task:42:*`)."""
    return key.startswith(pattern[:-1]) if pattern.endswith("*") else key == pattern


class Subscription(Protocol):
    """Signals for a key or prefix, in publish order, from where the subscriber left off."""

    @property
    def last_id(self) -> str: ...

    def __aiter__(self) -> AsyncIterator[Signal]: ...

    async def close(self) -> None: ...


class Board(Protocol):
    """What every blackboard backend offers; `tests/contract.py` checks it."""

    async def publish(self, key: str, value: str, *, publisher: str | None = None) -> Signal: ...

    async def get(self, key: str) -> Signal | None: ...

    async def list(self, prefix: str = "") -> list[Signal]: ...

    async def subscribe(self, pattern: str, *, after: str | None = None) -> Subscription: ...

    async def clear(self) -> int: ...

    async def close(self) -> None: ...
