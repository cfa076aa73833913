"""The identity layer of one runtime: its backend made off the event loop, and a block that always comes in time.

`configure` makes this object (cheap) and starts a warm-up thread that imports what the
backend needs (the Honcho SDK) and builds the configured model, so neither happens on the event
loop nor inside a turn's time. The backend itself (the store, the SDK clients) is made on
first use, in a worker thread.

Before each model call `context` works to its own deadline, `SAFETY_MARGIN` before the core's:
the live block (Honcho's dialectic, or the embedded retrieval and synthesis) gets what is left
minus `FALLBACK_RESERVE`; on timeout, error or outage the fallback block (hard facts plus the last
known model, marked as stale) is read from the local store in that reserve. A cold or hung
server, a backend still warming up, a failing model: the turn gets the fallback, never nothing.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from thoth_core import ContextBlock, Session, Turn, write_policy

from .backend import IdentityBackend, fallback_block, last_model
from .policy import visible
from .settings import IdentitySettings, load_settings
from .store import IdentityStore

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

SAFETY_MARGIN = 0.15  # seconds between the layer's own deadline and the core's
FALLBACK_RESERVE = 0.15  # seconds kept for reading the fallback from the local store


def make_backend(runtime: Runtime, settings: IdentitySettings, store: IdentityStore) -> IdentityBackend:
    """The configured backend over a store."""
    logger.info("identity: %s backend, store %s", settings.backend, store.where)
    if settings.backend == "honcho":
        from .honcho_backend import HonchoBackend

        return HonchoBackend(runtime, settings, store)
    from .embedded import EmbeddedBackend

    return EmbeddedBackend(runtime, settings, store)


def _warm_up(runtime: Runtime, settings: IdentitySettings) -> None:
    """Load the write policy, import the backend's modules and build the model, so the first turn does not pay."""
    started = time.perf_counter()
    try:
        write_policy.warm()  # the word list and tables the block's judgements need
        if settings.backend == "honcho":
            from . import honcho_backend  # noqa: F401 - imports the honcho SDK (0.3-0.5 s)
        else:
            from . import embedded  # noqa: F401

            uses_model = settings.synthesis or settings.derive or settings.remember_timeout > 0
            if uses_model and runtime.model_name() is not None:
                runtime.model()
    except Exception as exc:  # noqa: BLE001 - the first use reports it properly
        logger.debug("identity: warm-up failed: %s: %s", type(exc).__name__, exc)
    logger.debug("identity: warm-up took %.2fs", time.perf_counter() - started)


def _seen(future: asyncio.Future[Any]) -> None:
    """Mark a future's outcome as read, so asyncio does not log it as never retrieved."""
    if not future.cancelled():
        future.exception()


class IdentityLayer:
    """Per-runtime state: settings, the store and backend (made once, off the loop), the deadline-bound block."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = load_settings(runtime)
        self._lock = threading.Lock()
        self._store: IdentityStore | None = None
        self._backend: IdentityBackend | None = None
        self._closed = False
        self.last_kind = ""  # `live` or `fallback`: what the last block was (for status and the bench)
        self.warmed: Future[None] = Future()
        threading.Thread(target=self._warm, name="thoth-identity-warm-up", daemon=True).start()

    def _warm(self) -> None:
        self.warmed.set_running_or_notify_cancel()
        _warm_up(self.runtime, self.settings)
        self.warmed.set_result(None)

    @property
    def path(self) -> Any:
        """The identity database of this runtime's home."""
        return self.runtime.home / "identity" / "identity.db"

    def store(self) -> IdentityStore:
        """The local store, opened on first use (blocking: call from a worker thread)."""
        if self._store is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError("identity: the layer is closed")
                if self._store is None:
                    self._store = IdentityStore(self.path, self.runtime.config)
        return self._store

    def backend(self) -> IdentityBackend:
        """The backend, made on first use (blocking: call from a worker thread or a command)."""
        if self._backend is None:
            store = self.store()
            with self._lock:
                if self._closed:  # closed while the store opened: a late first use makes nothing
                    raise RuntimeError("identity: the layer is closed")
                if self._backend is None:
                    backend = make_backend(self.runtime, self.settings, store)
                    backend.start()
                    self._backend = backend
        return self._backend

    async def backend_async(self) -> IdentityBackend:
        """The backend, made in a worker thread when it does not exist yet (the loop never blocks on it)."""
        if self._backend is not None:
            return self._backend
        making = asyncio.get_running_loop().run_in_executor(None, self.backend)
        making.add_done_callback(_seen)  # a turn past its deadline stops waiting; a later use reports a failure
        return await asyncio.shield(making)

    async def context(self, turn: Turn, session: Session) -> ContextBlock | None:
        """The `user-model` block, live when it comes in time, else the fallback; always within the deadline."""
        until = time.monotonic() + self.runtime.deadline_for("identity") - SAFETY_MARGIN
        live_until = until - FALLBACK_RESERVE
        try:
            backend = await asyncio.wait_for(self.backend_async(), max(0.0, live_until - time.monotonic()))
            block = await asyncio.wait_for(
                backend.context(turn, session, until=live_until), max(0.0, live_until - time.monotonic())
            )
            self.last_kind = backend.last_kind
            return block
        except TimeoutError:
            reason = "no answer in time"
        except Exception as exc:  # noqa: BLE001 - an error costs the live part, never the block
            reason = f"{type(exc).__name__}: {exc}"
        logger.warning("identity: user model for %s not ready (%s); using the fallback", turn.peer, reason)
        self.last_kind = "fallback"
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(
                asyncio.shield(loop.run_in_executor(None, self.fallback, turn)), max(0.05, until - time.monotonic())
            )
        except Exception as exc:  # noqa: BLE001
            logger.error("identity: the fallback for %s could not be read either: %s", turn.peer, exc)
            return fallback_block(turn.peer, facts=[], cached=None, budget=self._budget())

    def fallback(self, turn: Turn) -> ContextBlock | None:
        """Hard facts and the last known model from the local store, marked as stale."""
        backend = self._backend
        if backend is not None:
            return backend.fallback(turn)
        store = self.store()
        return fallback_block(
            turn.peer,
            facts=visible(store, turn.workspace, turn.peer, facts=store.current_facts(turn.workspace, turn.peer))[0],
            cached=last_model(store, turn.workspace, turn.peer),
            text=turn.text,
            budget=self._budget(),
        )

    def _budget(self) -> int:
        return int(self.runtime.config.layer_budgets.get("identity", 800))

    def close(self) -> None:
        """Close the backend (or the store alone); a backend being made (a turn past its deadline) is waited for."""
        with self._lock:
            self._closed = True
        if self._backend is not None:
            self._backend.close()
        elif self._store is not None:
            self._store.close()


def layer_for(runtime: Runtime) -> IdentityLayer:
    """This runtime's identity layer (settings checked, warm-up started), made on first use."""
    return runtime.plugin_state("identity", lambda: IdentityLayer(runtime))  # type: ignore[no-any-return]


def backend_for(runtime: Runtime) -> IdentityBackend:
    """This runtime's identity backend, made on first use (blocking: not on the event loop)."""
    return layer_for(runtime).backend()


async def backend_async(runtime: Runtime) -> IdentityBackend:
    """This runtime's identity backend, made in a worker thread on first use."""
    return await layer_for(runtime).backend_async()
