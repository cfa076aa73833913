"""One asyncio loop in a background thread, fed by Bolt's (synchronous) listener threads.

The runtime is asyncio and must only be touched from its own loop; Bolt calls listeners on
its own threads. Listeners hand work over with `submit` (fire and forget, tracked so that
`join` can wait for it) or `call` (wait for the result).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

logger = logging.getLogger(__name__)


class LoopThread:
    """An event loop running in a daemon thread."""

    def __init__(self, name: str = "thoth-slack-loop", workers: int = 32) -> None:
        self.loop = asyncio.new_event_loop()
        self.loop.set_default_executor(ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"{name}-io"))
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._pending: set[Future[Any]] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the loop's thread."""
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Future[Any]:
        """Run a coroutine on the loop without waiting; failures are logged."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        with self._lock:
            self._pending.add(future)
        future.add_done_callback(self._done)
        return future

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = 60) -> Any:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def join(self, timeout: float = 30) -> bool:
        """Wait until every submitted coroutine has finished; False if some still run after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pending = list(self._pending)
            left = deadline - time.monotonic()
            if not pending:
                return True
            if left <= 0:
                return False
            wait(pending, timeout=left)

    def cancel_pending(self) -> int:
        """Cancel every submitted coroutine still running; returns how many."""
        with self._lock:
            pending = list(self._pending)
        return sum(future.cancel() for future in pending)

    def stop(self) -> None:
        """Stop the loop and wait for its thread."""
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)
        self.loop.close()

    def _done(self, future: Future[Any]) -> None:
        with self._lock:
            self._pending.discard(future)
        if not future.cancelled() and future.exception() is not None:
            exc = future.exception()
            logger.error("slack: background work failed: %s: %s", type(exc).__name__, exc, exc_info=exc)
