"""Calling each plugin's hook on its own: concurrent, timed, and isolated from the others.

pluggy stops at the first exception and cannot await, so the runtime iterates the
implementations itself. Coroutine functions are awaited; plain functions run in a worker
thread so that one which blocks cannot stall the event loop or the turn. The workers are
daemon threads: a plugin stuck past its deadline must not keep `thoth` from exiting.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pluggy

from .errors import ConfigError
from .types import PluginCall

logger = logging.getLogger(__name__)


class _DaemonWorkers:
    """Worker threads for plain hook impls that, unlike ThreadPoolExecutor's, are never joined at exit."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = queue.SimpleQueue()
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run fn on an idle worker, starting a new one when all are busy (or stuck)."""
        future: Future[Any] = Future()
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                threading.Thread(target=self._work, name="thoth-plugin", daemon=True).start()
        self._jobs.put((fn, future))
        return future

    def _work(self) -> None:
        while True:
            fn, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting caller
                    future.set_exception(exc)
            del fn, future
            with self._lock:
                self._idle += 1


_workers = _DaemonWorkers()
_worker_loop = threading.local()


def in_loop_thread(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether the caller runs in that event loop's thread."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def hook_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop of this thread, or of the hook call this worker thread is running for."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return getattr(_worker_loop, "loop", None)


def _in_worker(loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        _worker_loop.loop = loop
        try:
            return fn()
        finally:
            _worker_loop.loop = None

    return run


def _arguments(impl: pluggy.HookImpl, kwargs: dict[str, Any]) -> dict[str, Any]:
    return {name: kwargs[name] for name in impl.argnames if name in kwargs}


async def _call_one(
    impl: pluggy.HookImpl, hook: str, kwargs: dict[str, Any], deadline: float | None
) -> tuple[Any, PluginCall]:
    started = time.perf_counter()
    try:
        if inspect.iscoroutinefunction(impl.function):
            awaitable = impl.function(**_arguments(impl, kwargs))
        else:
            work = _in_worker(asyncio.get_running_loop(), lambda: impl.function(**_arguments(impl, kwargs)))
            awaitable = asyncio.wrap_future(_workers.submit(work))
        result = await asyncio.wait_for(awaitable, deadline) if deadline else await awaitable
        if inspect.isawaitable(result):
            left = max(deadline - (time.perf_counter() - started), 0.0) if deadline else None
            result = await asyncio.wait_for(result, left) if left is not None else await result
        seconds = time.perf_counter() - started
        if result is None and deadline and seconds > deadline:  # gave up at its deadline, seen late (a busy loop)
            raise TimeoutError
        return result, PluginCall(impl.plugin_name, hook, seconds, "ok")
    except TimeoutError:
        seconds = time.perf_counter() - started
        logger.warning("plugin %s: %s timed out after %.2fs; skipped", impl.plugin_name, hook, seconds)
        return None, PluginCall(impl.plugin_name, hook, seconds, "timeout", f"timed out after {deadline}s")
    except Exception as exc:  # noqa: BLE001 - isolation is the point
        seconds = time.perf_counter() - started
        logger.error(
            "plugin %s: %s failed: %s: %s",
            impl.plugin_name,
            hook,
            type(exc).__name__,
            exc,
            exc_info=logger.isEnabledFor(logging.DEBUG),
        )
        return None, PluginCall(impl.plugin_name, hook, seconds, "error", f"{type(exc).__name__}: {exc}")


async def call_each(
    pm: pluggy.PluginManager,
    hook: str,
    kwargs: dict[str, Any],
    *,
    deadline_for: Callable[[str], float | None] = lambda _name: None,
    only: set[str] | None = None,
) -> list[tuple[str, Any, PluginCall]]:
    """Call every implementation of a hook (or `only` those plugins') concurrently; (plugin, result, call) each."""
    impls = [i for i in getattr(pm.hook, hook).get_hookimpls() if only is None or i.plugin_name in only]
    outcomes = await asyncio.gather(*(_call_one(impl, hook, kwargs, deadline_for(impl.plugin_name)) for impl in impls))
    for _result, call in outcomes:
        trace(call)
    return [(impl.plugin_name, result, call) for impl, (result, call) in zip(impls, outcomes, strict=True)]


def call_sync(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """Call a hook in every plugin on this thread, logging (not raising) each plugin's failure.

    A ConfigError is raised, not logged: a bad thoth.toml stops the command instead of leaving the
    plugin half-configured (and, say, `thoth review` showing an empty queue).
    Returns (plugin, result) for each plugin that did not fail.
    """
    results = []
    for impl in getattr(pm.hook, hook).get_hookimpls():
        started = time.perf_counter()
        try:
            results.append((impl.plugin_name, impl.function(**_arguments(impl, kwargs))))
            trace(PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "ok"))
        except ConfigError as exc:
            trace(PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "error", str(exc)))
            raise
        except Exception as exc:  # noqa: BLE001
            logger.error("plugin %s: %s failed: %s: %s", impl.plugin_name, hook, type(exc).__name__, exc)
            trace(PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "error", str(exc)))
    return results


def trace(call: PluginCall) -> None:
    """With `THOTH_TRACE_PLUGINS` set, one stderr line per hook call: plugin.hook, outcome, time."""
    if os.environ.get("THOTH_TRACE_PLUGINS", "").strip().lower() not in ("", "0", "false", "no", "off"):
        error = f" ({call.error})" if call.error else ""
        took = f"{call.seconds * 1000:.1f} ms"
        print(f"thoth trace: {call.plugin}.{call.hook} {call.status} {took}{error}", file=sys.stderr)
