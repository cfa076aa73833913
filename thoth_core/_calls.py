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

An `async def` implementation that blocks (a `time.sleep` between two awaits) stalls every other
call on the loop, and their deadlines fire late. Each coroutine implementation is driven through
`_Timed`, which times every step it runs on the loop (two clock reads a step, nothing else): the
plugin whose step held the loop past its own deadline gets `blocked-loop`, and the time a step of
another plugin held the loop is added to each waiting call's deadline, so the innocent plugin stalled
behind it is not blamed. Timing each step catches a block after the first `await` too, which timing
only the first step would miss, and costs no thread or loop-lag probe. A result of the wrong type
(`results.check`) is `bad-result`. Each verdict is one line; the traceback only with
`THOTH_TRACE_PLUGINS`, `--debug` or debug logging (`tracebacks()`).
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
from collections import deque
from collections.abc import Awaitable, Callable, Generator, Iterable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, Protocol

import pluggy

from .errors import ConfigError
from .hookspecs import HookPolicy
from .manager import ThothPluginManager
from .results import check
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


STALL_RECORDED = 0.02  # seconds: a step holding the loop longer is remembered, to excuse the calls it delayed
_stalls: deque[tuple[int, str, float, float]] = deque(maxlen=256)  # (loop id, plugin, start, end), perf_counter
_debug = [False]


def show_tracebacks(on: bool = True) -> None:
    """Let one-line plugin failures carry their traceback (`thoth --debug`)."""
    _debug[0] = on


def tracing() -> bool:
    """Whether `THOTH_TRACE_PLUGINS` is set."""
    return os.environ.get("THOTH_TRACE_PLUGINS", "").strip().lower() not in ("", "0", "false", "no", "off")


def tracebacks() -> bool:
    """Whether a plugin's failure is shown with its traceback: `--debug`, `THOTH_TRACE_PLUGINS` or debug logging."""
    return _debug[0] or tracing() or logger.isEnabledFor(logging.DEBUG)


class _Timed:
    """Drives one coroutine step by step, timing how long each step held the event loop."""

    def __init__(self, coro: Any, plugin: str) -> None:
        self.coro, self.plugin, self.longest = coro, plugin, 0.0

    def _held(self, start: float) -> None:
        end = time.perf_counter()
        self.longest = max(self.longest, end - start)
        if end - start >= STALL_RECORDED:
            _stalls.append((id(asyncio.get_running_loop()), self.plugin, start, end))

    def __await__(self) -> Generator[Any, Any, Any]:
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            start = time.perf_counter()
            try:
                step = self.coro.throw(thrown) if thrown is not None else self.coro.send(sent)
            except StopIteration as stop:
                self._held(start)
                return stop.value
            except BaseException:
                self._held(start)
                raise
            self._held(start)
            try:
                sent, thrown = (yield step), None
            except GeneratorExit:
                self.coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001 - handed on to the coroutine (a cancellation)
                sent, thrown = None, exc


def stalled_by_others(plugin: str, since: float) -> float:
    """Seconds since `since` (perf_counter) that steps of other plugins held this event loop."""
    now, loop = time.perf_counter(), id(asyncio.get_running_loop())
    return sum(
        max(0.0, min(end, now) - max(start, since))
        for where, who, start, end in list(_stalls)
        if where == loop and who != plugin and end > since
    )


def _stallers(plugin: str, since: float) -> list[str]:
    loop = id(asyncio.get_running_loop())
    return sorted({who for where, who, _, end in list(_stalls) if where == loop and who != plugin and end > since})


async def _within(awaitable: Awaitable[Any], deadline: float | None, plugin: str, started: float) -> Any:
    """Await within `deadline` seconds from `started`, plus the time other plugins held the loop meanwhile."""
    if not deadline:  # None or 0: no deadline
        return await awaitable
    task = asyncio.ensure_future(awaitable)
    try:
        while True:
            left = deadline + stalled_by_others(plugin, started) - (time.perf_counter() - started)
            if left <= 0:
                break
            done, _ = await asyncio.wait({task}, timeout=left)
            if done:
                return task.result()
    except asyncio.CancelledError:
        task.cancel()
        raise
    task.cancel()
    raise TimeoutError


def _finished(result: Any) -> tuple[Any, float]:
    """A worker's result and when it came (perf_counter)."""
    return result, time.perf_counter()


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
    plugin = impl.plugin_name
    timed: _Timed | None = None
    awaitable: Awaitable[Any]
    try:
        if inspect.iscoroutinefunction(impl.function):
            awaitable = timed = _Timed(impl.function(**_arguments(impl, kwargs)), plugin)
        else:
            work = _in_worker(asyncio.get_running_loop(), lambda: _finished(impl.function(**_arguments(impl, kwargs))))
            awaitable = asyncio.wrap_future(_workers.submit(work))
        result = await _within(awaitable, deadline, plugin, started)
        # a thread's own time counts (a stalled loop only saw its result late); a coroutine's, less the stalls
        seconds = result[1] - started if timed is None else None
        result = result[0] if timed is None else result
        if inspect.isawaitable(result):
            timed = _Timed(result, plugin) if inspect.iscoroutine(result) else None
            result = await _within(timed or result, deadline, plugin, started)
            seconds = None
        if seconds is None:
            seconds = time.perf_counter() - started - stalled_by_others(plugin, started)
        if timed is not None and deadline and timed.longest > deadline:
            raise TimeoutError
        if result is None and deadline and seconds > deadline:
            raise TimeoutError  # gave up at its deadline, seen late (a busy loop)
        return _checked(result, PluginCall(plugin, hook, seconds, "ok"))
    except TimeoutError:
        seconds = time.perf_counter() - started
        if timed is not None and deadline and timed.longest > deadline:
            error = (
                f"blocked the event loop for {timed.longest:.2f}s in one step (deadline {deadline}s):"
                " an async def hook must await, not block (or be a plain def, run in a thread)"
            )
            logger.error("plugin %s: %s %s; skipped", plugin, hook, error)
            return None, PluginCall(plugin, hook, seconds, "blocked-loop", error)
        stalled = _stallers(plugin, started) if timed is not None else []  # a thread ran on meanwhile
        blame = f"; the event loop was blocked by {', '.join(stalled)}" if stalled else ""
        logger.warning("plugin %s: %s timed out after %.2fs%s; skipped", plugin, hook, seconds, blame)
        return None, PluginCall(plugin, hook, seconds, "timeout", f"timed out after {deadline}s{blame}")
    except Exception as exc:
        if not isolated:
            raise
        return None, _failed(impl, hook, exc, time.perf_counter() - started)


def _checked(result: Any, record: PluginCall) -> tuple[Any, PluginCall]:
    """The usable part of a result; a result of the wrong type makes the call `bad-result`, logged in one line."""
    kept, problem = check(record.hook, result)
    if problem is None:
        return result, record
    logger.error("plugin %s: %s %s; skipped", record.plugin, record.hook, problem)
    return kept, replace(record, status="bad-result", error=problem)


def _failed(impl: pluggy.HookImpl, hook: str, exc: Exception, seconds: float) -> PluginCall:
    logger.error(
        "plugin %s: %s failed: %s: %s",
        impl.plugin_name,
        hook,
        type(exc).__name__,
        exc,
        exc_info=exc if tracebacks() else None,
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
        return _checked(result, PluginCall(impl.plugin_name, hook, time.perf_counter() - started, "ok"))
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
    if tracing():
        error = f" ({record.error})" if record.error else ""
        took = f"{record.seconds * 1000:.1f} ms"
        print(f"thoth trace: {record.plugin}.{record.hook} {record.status} {took}{error}", file=sys.stderr)
