"""The in-process board: one asyncio log shared by all subscribers, each with its own cursor.

With a `path` the values are saved on close (merged over what other processes saved since,
written atomically) and loaded on start; subscriptions still only see this process's publishes.

Publishing appends to the log and wakes waiting subscribers; it never waits for them, so a
slow subscriber cannot block a publisher. The log keeps the newest `keep` signals; a
subscriber that fell further behind resumes from the oldest one kept.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections import deque
from collections.abc import AsyncIterator
from itertools import islice
from pathlib import Path

from .board import BoardError, Signal, check, matches


class InProcessBoard:
    """A blackboard inside one process; optionally saved to a JSON file on close."""

    def __init__(self, *, keep: int = 10_000, path: Path | None = None) -> None:
        self.values: dict[str, Signal] = {}
        self.log: deque[tuple[int, Signal]] = deque(maxlen=keep)
        self.seq = 0
        self.changed = asyncio.Condition()
        self.path = path
        self.changed_keys: set[str] = set()
        self.cleared = False
        for signal in self._saved():
            self.values[signal.key] = signal
            self.seq = max(self.seq, int(signal.id))

    def _saved(self) -> list[Signal]:
        if not self.path or not self.path.exists():
            return []
        try:
            return [Signal(**item) for item in json.loads(self.path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError) as exc:
            raise BoardError(f"{self.path}: cannot read the saved blackboard: {exc}") from exc

    async def publish(self, key: str, value: str, *, publisher: str | None = None) -> Signal:
        """Store the value, append it to the log, wake subscribers."""
        check(key, value)
        self.seq += 1
        signal = Signal(key, value, publisher, str(self.seq))
        self.values[key] = signal
        self.changed_keys.add(key)
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
        self.changed_keys.clear()
        self.cleared = True
        return count

    async def close(self) -> None:
        """Save the values when persistent: what this process changed, over what others saved since."""
        if not self.path:
            return
        merged = {} if self.cleared else {s.key: s for s in self._saved()}
        merged.update({key: self.values[key] for key in self.changed_keys})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(".tmp")
        temporary.write_text(json.dumps([s.__dict__ for s in merged.values()]), encoding="utf-8")
        os.replace(temporary, self.path)


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
