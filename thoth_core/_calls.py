"""The dispatcher: every hook call goes through here, as its `HookPolicy` says.

Each hook's policy (`hookspecs.POLICIES`, or the `POLICIES` of a plugin's own hookspecs module) gives
its call style, its deadline and whether a failure is isolated:

- `each`: every implementation at once; coroutine functions are awaited, plain functions run in a
  worker thread so that one which blocks cannot stall the event loop or the turn.
- `first`: one implementation at a time in pluggy's calling order (LIFO, tryfirst first), each
  isolated and timed, stopping at the first non-None result (the spec is `firstresult`).
- `historic`: on the caller's thread; the call is remembered and replayed, through the same path,
  for a plugin registered later (`replay`).
- `sync`: on the caller's thread, one plugin after the other (registries, the CLI, `thoth init`).

pluggy stops at the first exception and cannot await, so the dispatcher iterates the implementations
itself. An isolated failure is logged with the plugin's name and its result counts as None; a
ConfigError from a call on the caller's thread is raised (a bad thoth.toml stops the command). The
workers are daemon threads: a plugin stuck past its deadline must not keep `thoth` from exiting.
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
from collections.abc import Awaitable, Callable, Iterable
from concurrent.futures import Future
from typing import Any, Protocol

import pluggy

from .errors import ConfigError
from .hookspecs import HookPolicy
from .manager import ThothPluginManager
from .types import PluginCall

logger = logging.getLogger(__name__)

Outcome = tuple[str, Any, PluginCall]  # (plugin, result, how the call went)


class Deadlines(Protocol):
    """Where the dispatcher finds a plugin's deadlines (the runtime)."""

    def deadline_for(self, plugin: str) -> float:
        """Seconds a plugin may take on a turn's hook."""
        ...

    def background_deadline(self, plugin: str) -> float:
        """Seconds a plugin may take on background work."""
        ...


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


def policy_of(pm: pluggy.PluginManager, hook: str) -> HookPolicy:
    """The policy a hook is called with (a bare pluggy manager: the spec's options)."""
    if isinstance(pm, ThothPluginManager):
        return pm.policy(hook)
    caller = getattr(pm.hook, hook, None)
    spec = caller.spec if caller is not None else None
    return HookPolicy.of_spec(spec.opts if spec is not None else {})


def _impls(
    pm: pluggy.PluginManager, hook: str, only: Iterable[str] | None, policy: HookPolicy
) -> list[pluggy.HookImpl]:
    caller = getattr(pm.hook, hook, None)
    found = [i for i in caller.get_hookimpls() if only is None or i.plugin_name in only] if caller is not None else []
    return found[::-1] if policy.firstresult else found  # pluggy calls a firstresult hook last-registered first


def deadline_of(
    policy: HookPolicy,
    plugin: str,
    deadlines: Deadlines | None,
    *,
    until: float | None = None,
    extra: float = 0.0,
) -> float | None:
    """The seconds one plugin's call may take: its policy's kind of deadline, plus `extra`, but never past `until`."""
    if deadlines is None or policy.deadline == "none" or policy.in_caller_thread:
        return None
    own = deadlines.deadline_for(plugin) if policy.deadline == "turn" else deadlines.background_deadline(plugin)
    own += extra
    return own if until is None else max(0.01, min(own, until - time.monotonic()))


async def _call_one(
    impl: pluggy.HookImpl, hook: str, kwargs: dict[str, Any], deadline: float | None, isolated: bool = True
) -> tuple[Any, PluginCall]:
    started = time.perf_counter()
    awaitable: Awaitable[Any]
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
    except Exception as exc:
        if not isolated:
            raise
        return None, _failed(impl, hook, exc, time.perf_counter() - started)


def _failed(impl: pluggy.HookImpl, hook: str, exc: Exception, seconds: float) -> PluginCall:
    logger.error(
        "plugin %s: %s failed: %s: %s",
        impl.plugin_name,
        hook,
        type(exc).__name__,
        exc,
        exc_info=logger.isEnabledFor(logging.DEBUG),
    )
    return PluginCall(impl.plugin_name, hook, seconds, "error", f"{type(exc).__name__}: {exc}")


def _call_one_here(
    impl: pluggy.HookImpl, hook: str, kwargs: dict[str, Any], policy: HookPolicy
) -> tuple[Any, PluginCall]:
    """One implementation on the caller's thread; a ConfigError (or any failure of a hook not isolated) is raised."""
    started = time.perf_counter()
    try:
        result = impl.function(**_arguments(impl, kwargs))
        if inspect.iscoroutine(result):
            result.close()
            raise TypeError(f"{hook} is called on the caller's thread: it must be a plain function, not async def")
        return result, PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "ok")
    except ConfigError as exc:
        trace(PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "error", str(exc)))
        raise
    except Exception as exc:
        if not policy.isolated:
            trace(PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "error", str(exc)))
            raise
        return None, _failed(impl, hook, exc, time.perf_counter() - started)


def call_here(
    pm: pluggy.PluginManager, hook: str, kwargs: dict[str, Any], *, only: Iterable[str] | None = None
) -> list[Outcome]:
    """Call a hook on the caller's thread, one plugin after the other, without deadlines.

    For `sync` and `historic` hooks (a historic call is remembered for plugins registered later),
    and for code that has no event loop (the CLI, a bundle import); a `first` hook stops at the
    first non-None result.
    """
    policy = policy_of(pm, hook)
    if policy.historic and only is None and isinstance(pm, ThothPluginManager):
        pm.history.append((hook, kwargs))
    outcomes: list[Outcome] = []
    for impl in _impls(pm, hook, only, policy):
        result, record = _call_one_here(impl, hook, kwargs, policy)
        trace(record)
        outcomes.append((impl.plugin_name, result, record))
        if policy.firstresult and result is not None:
            break
    return outcomes


async def call(
    pm: pluggy.PluginManager,
    hook: str,
    kwargs: dict[str, Any],
    *,
    deadlines: Deadlines | None = None,
    only: Iterable[str] | None = None,
    until: float | None = None,
    extra: float = 0.0,
) -> list[Outcome]:
    """Call a hook as its policy says; (plugin, result, call record) for each implementation called.

    `deadlines` gives each plugin's turn and background deadlines (none without it); `extra` seconds
    are added to each, and no plugin runs past `until` (monotonic). `only` limits the call to those plugins.
    """
    policy = policy_of(pm, hook)
    if policy.in_caller_thread:
        return call_here(pm, hook, kwargs, only=only)
    impls = _impls(pm, hook, only, policy)

    def deadline(impl: pluggy.HookImpl) -> float | None:
        return deadline_of(policy, impl.plugin_name, deadlines, until=until, extra=extra)

    if policy.firstresult:
        outcomes: list[Outcome] = []
        for impl in impls:
            result, record = await _call_one(impl, hook, kwargs, deadline(impl), policy.isolated)
            trace(record)
            outcomes.append((impl.plugin_name, result, record))
            if result is not None:
                break
        return outcomes
    done = await asyncio.gather(*(_call_one(impl, hook, kwargs, deadline(impl), policy.isolated) for impl in impls))
    for _result, record in done:
        trace(record)
    return [(impl.plugin_name, result, record) for impl, (result, record) in zip(impls, done, strict=True)]


def replay(pm: ThothPluginManager, plugin: str) -> list[Outcome]:
    """Make the historic calls made so far (`configure`, `add_hookspecs`) to a plugin registered since."""
    outcomes: list[Outcome] = []
    for hook, kwargs in list(pm.history):
        outcomes += call_here(pm, hook, kwargs, only={plugin})
    return outcomes


class _Fixed:
    """Deadlines from one function, for `call_each`'s callers."""

    def __init__(self, deadline_for: Callable[[str], float | None]) -> None:
        self._deadline_for = deadline_for

    def deadline_for(self, plugin: str) -> float:
        return self._deadline_for(plugin) or 0.0

    background_deadline = deadline_for


async def call_each(
    pm: pluggy.PluginManager,
    hook: str,
    kwargs: dict[str, Any],
    *,
    deadline_for: Callable[[str], float | None] = lambda _name: None,
    only: set[str] | None = None,
) -> list[Outcome]:
    """`call` with each plugin's deadline from one function (none by default); kept for tests written before `call`."""
    return await call(pm, hook, kwargs, deadlines=_Fixed(deadline_for), only=only)


def call_sync(pm: pluggy.PluginManager, hook: str, **kwargs: Any) -> list[tuple[str, Any]]:
    """`call_here` with keyword arguments: (plugin, result) for each plugin that did not fail."""
    return [(plugin, result) for plugin, result, record in call_here(pm, hook, kwargs) if record.status == "ok"]


def trace(record: PluginCall) -> None:
    """With `THOTH_TRACE_PLUGINS` set, one stderr line per hook call: plugin.hook, outcome, time."""
    if os.environ.get("THOTH_TRACE_PLUGINS", "").strip().lower() not in ("", "0", "false", "no", "off"):
        error = f" ({record.error})" if record.error else ""
        took = f"{record.seconds * 1000:.1f} ms"
        print(f"thoth trace: {record.plugin}.{record.hook} {record.status} {took}{error}", file=sys.stderr)
