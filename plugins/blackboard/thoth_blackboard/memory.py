"""The in-process board: one asyncio log shared by all subscribers, each with its own cursor.

Publishing appends to the log and wakes waiting subscribers; it never waits for them, so a
slow subscriber cannot block a publisher. The log keeps the newest `keep` signals; a
subscriber that fell further behind resumes from the oldest one kept.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import AsyncIterator
from itertools import islice
from pathlib import Path

from .board import Signal, check, matches


class InProcessBoard:
    """A blackboard inside one process; optionally saved to a JSON file on close."""

    def __init__(self, *, keep: int = 10_000, path: Path | None = None) -> None:
        self.values: dict[str, Signal] = {}
        self.log: deque[tuple[int, Signal]] = deque(maxlen=keep)
        self.seq = 0
        self.changed = asyncio.Condition()
        self.path = path
        if path and path.exists():
            for item in json.loads(path.read_text(encoding="utf-8")):
                signal = Signal(**item)
                self.values[signal.key] = signal
                self.seq = max(self.seq, int(signal.id))

    async def publish(self, key: str, value: str, *, publisher: str | None = None) -> Signal:
        """Store the value, append it to the log, wake subscribers."""
        check(key, value)
        self.seq += 1
        signal = Signal(key, value, publisher, str(self.seq))
        self.values[key] = signal
        self.log.append((self.seq, signal))
        async with self.changed:
            self.changed.notify_all()
        return signal

    async def get(self, key: str) -> Signal | None:
        """The current value of a key."""
        return self.values.get(key)

    async def list(self, prefix: str = "") -> list[Signal]:
        """Current values of every key starting with prefix, sorted by key."""
        return [self.values[k] for k in sorted(self.values) if k.startswith(prefix)]

    async def subscribe(self, pattern: str, *, after: str | None = None) -> InProcessSubscription:
        """Every later signal whose key matches pattern (or after a given id)."""
        return InProcessSubscription(self, pattern, int(after) if after else self.seq)

    async def clear(self) -> int:
        """Forget every value; returns how many keys there were."""
        count = len(self.values)
        self.values.clear()
        return count

    async def close(self) -> None:
        """Save the values when the board is persistent."""
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = [s.__dict__ for s in self.values.values()]
            self.path.write_text(json.dumps(data), encoding="utf-8")


class InProcessSubscription:
    """A cursor into an in-process board's log."""

    def __init__(self, board: InProcessBoard, pattern: str, after: int) -> None:
        self.board, self.pattern, self.cursor = board, pattern, after
        self.closed = False

    @property
    def last_id(self) -> str:
        """The id of the last signal delivered (or skipped as not matching)."""
        return str(self.cursor)

    def _pending(self) -> list[Signal]:
        behind = min(self.board.seq - self.cursor, len(self.board.log))
        fresh = list(islice(reversed(self.board.log), behind))[::-1]
        self.cursor = self.board.seq
        return [s for _, s in fresh if matches(s.key, self.pattern)]

    async def __aiter__(self) -> AsyncIterator[Signal]:  # type: ignore[override]
        while not self.closed:
            for signal in self._pending():
                yield signal
            async with self.board.changed:
                await self.board.changed.wait_for(lambda: self.closed or self.board.seq > self.cursor)

    async def close(self) -> None:
        """Stop the subscription; a waiting iterator ends."""
        self.closed = True
        async with self.board.changed:
            self.board.changed.notify_all()
