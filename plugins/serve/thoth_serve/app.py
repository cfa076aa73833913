"""The service's ASGI application: FastAPI, its lifespan owning the runtime.

`create_app(home)` loads the runtime in the app's lifespan (`Runtime.load`), lets plugins add their
routes (`serve_routes`: the MCP transport, the inspector, warm hooks), runs the lifespans of the
Starlette apps they mount, ends idle sessions every minute and, at shutdown, ends the sessions it
opened and closes the runtime (pending writes drained). `create_app(runtime=rt)` serves a runtime
the caller owns (tests): the routes are there at once and no lifespan is needed.
`from_environment()` is the factory uvicorn's workers call (`--workers N`): options come from
`THOTH_SERVE_OPTIONS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.cors import CORSMiddleware

from thoth_core.approvals import ApprovalRefused
from thoth_core.errors import InputError, ModelNotConfigured, ThothError
from thoth_core.scope import ScopeError

from .api import router, version
from .auth import COOKIE, Guard, same_token
from .ops import one_line
from .options import ServeOptions
from .state import ServeState

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

REAP_EVERY = 60.0  # seconds between checks for idle sessions
INSPECTOR = "thoth_serve.inspector"
INSPECTOR_NAME = "serve-inspector"


def config_file(home: Path | None) -> Path | None:
    """The thoth.toml of an agent home given as its folder or as the file itself (None: the usual search)."""
    if home is None:
        return None
    return home / "thoth.toml" if home.is_dir() else home


def create_app(
    home: Path | None = None, *, runtime: Runtime | None = None, options: ServeOptions | None = None
) -> FastAPI:
    """The service for the agent home at `home` (or a runtime the caller owns and closes)."""
    options = options or ServeOptions()
    path = config_file(home) if home is not None else (Path(options.config) if options.config else None)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = not hasattr(app.state, "serve")
        if owned:
            attach(app, load_runtime(path), options)
        state: ServeState = app.state.serve
        state.events.closed = False
        restore = on_stop_signal(state.events.close)
        await replay(state.runtime)  # what a killed worker (or an earlier run) left journaled, not at the first turn
        reaper = asyncio.ensure_future(reap_idle(state.runtime))
        try:
            async with contextlib.AsyncExitStack() as stack:
                for sub in mounted_apps(app):  # e.g. the MCP session manager: it serves inside our lifespan
                    await stack.enter_async_context(sub.router.lifespan_context(sub))
                yield
        finally:
            restore()
            reaper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reaper
            if state.turns:  # turns whose client left still finish and are kept
                await asyncio.wait(list(state.turns))
            if owned:
                await close(state.runtime)

    app = FastAPI(
        title="Thoth",
        version=version() or "0",
        summary="One agent home's memory as a service: recall, remember, context, turns, records, approvals.",
        lifespan=lifespan,
        docs_url=None,  # the Swagger and ReDoc pages load scripts from a CDN; /openapi.json is served
        redoc_url=None,
    )
    app.include_router(router)
    install_handlers(app)

    @app.get("/login", include_in_schema=False)
    async def login(token: str = "", next: str = "/") -> Any:  # noqa: A002 - the query parameter's name
        """Set the token cookie the inspector's pages use, then go to `next` (a path of this service)."""
        if not options.token:
            return RedirectResponse(safe_next(next), status_code=303)
        if not same_token(token, options.token):
            return JSONResponse({"error": "login: wrong token"}, status_code=401)
        response = RedirectResponse(safe_next(next), status_code=303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    app.add_middleware(Guard, token=options.token, loopback=options.loopback)
    if options.cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(options.cors_origins),
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "Mcp-Protocol-Version"],
            expose_headers=["Mcp-Session-Id"],
        )
    if runtime is not None:
        attach(app, runtime, options)
    return app


def load_runtime(path: Path | None) -> Runtime:
    """The service's runtime; a ThothError (a plugin's bad value, a store refusing its URL) ends the process with
    its one line on stderr (exit 2), where a failing lifespan would print a traceback and go on."""
    from thoth_core import Runtime

    try:
        return Runtime.load(path)
    except ThothError as exc:
        print(f"thoth: error: {one_line(exc)}", file=sys.stderr, flush=True)
        os._exit(2)


def from_environment() -> FastAPI:
    """The app a uvicorn worker builds (`--workers N`), from the options in `THOTH_SERVE_OPTIONS`."""
    return create_app(options=ServeOptions.from_env())


def attach(app: FastAPI, runtime: Runtime, options: ServeOptions) -> None:
    """Give the app its runtime and the routes the plugins add (`serve_routes`)."""
    app.state.serve = ServeState.of(runtime, options)
    app.state.runtime = runtime  # what plugins' routes (the inspector) read
    register_inspector(runtime)
    added: list[Any] = []
    runtime.call_sync("serve_routes", register=added.append, runtime=runtime, scope=app.state.serve.scope)
    for route in added:
        if not hasattr(route, "matches"):
            logger.error("thoth serve: serve_routes registered %r, not a starlette route; skipped", route)
            continue
        app.router.routes.append(route)


def register_inspector(runtime: Runtime) -> None:
    """Register the built-in inspector's hooks (`thoth_serve.inspector`) with the runtime, once, where it exists."""
    module = inspector_module()
    if module is None or runtime.pm.is_registered(module) or runtime.pm.get_plugin(INSPECTOR_NAME) is not None:
        return
    runtime.register(module, name=INSPECTOR_NAME)


def inspector_module() -> ModuleType | None:
    """The inspector's module, or None where this install has none."""
    try:
        return importlib.import_module(INSPECTOR)
    except ModuleNotFoundError as exc:
        if exc.name in (INSPECTOR, *(f"{INSPECTOR}.{part}" for part in ("routes", "plugin"))):
            return None
        raise


def on_stop_signal(action: Callable[[], None]) -> Callable[[], None]:
    """Run action (on the event loop) when SIGINT/SIGTERM arrives, before the server's own handler; the undo.

    The server (uvicorn) then waits for open responses before it shuts down: the live event streams
    end at once instead of holding it up until its graceful timeout cancels them.
    """
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    loop = asyncio.get_running_loop()
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}

    def chained(sig: int, frame: FrameType | None) -> None:
        loop.call_soon_threadsafe(action)
        handler = previous[signal.Signals(sig)]
        if callable(handler):
            handler(sig, frame)
        elif handler == signal.SIG_DFL and sig == signal.SIGINT:
            signal.default_int_handler(sig, frame)
        elif handler == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)

    for sig in previous:
        signal.signal(sig, chained)

    def restore() -> None:
        for sig, handler in previous.items():
            if signal.getsignal(sig) is chained and handler is not None:
                signal.signal(sig, handler)

    return restore


def mounted_apps(app: FastAPI) -> list[Starlette]:
    """The Starlette applications plugins' routes serve (their lifespans run inside the service's)."""
    found = []
    for route in app.router.routes:
        inner = getattr(route, "app", None)
        if isinstance(inner, Starlette) and inner is not app:
            found.append(inner)
    return found


def safe_next(target: str) -> str:
    """A redirect target on this service only (a path, never another host)."""
    if not target.startswith("/") or target.startswith("//"):
        return "/"
    return quote(target, safe="/?=&%-._~")


async def reap_idle(runtime: Runtime) -> None:
    """Every minute: end idle sessions, like the other frontends, and replay what dead workers left journaled."""
    while True:
        await asyncio.sleep(REAP_EVERY)
        try:
            await runtime.reap_idle()
        except Exception as exc:  # noqa: BLE001 - a failing plugin must not stop the service
            logger.error("thoth serve: ending idle sessions failed: %s", exc)
        await replay(runtime)


async def replay(runtime: Runtime) -> None:
    """Replay the turn journal's rows no live process owns (a worker killed mid-write); never raises."""
    try:
        replayed = await runtime.recover()
    except Exception as exc:  # noqa: BLE001 - the rows stay journaled for the next try
        logger.error("thoth serve: replaying the turn journal failed: %s", exc)
        return
    if replayed:
        logger.warning("thoth serve: replayed %d journaled turn(s) another process left unwritten", replayed)


async def close(runtime: Runtime) -> None:
    """End every session the service opened (`session_end`, reason `exit`), then close the runtime."""
    for session in list(runtime.sessions.values()):
        await runtime.end_session(session, "exit")
    await runtime.aclose()


def install_handlers(app: FastAPI) -> None:
    """Every error is {"error": "one line"}: 422 bad input (naming the field), 400/403/404, 503, 500."""

    async def validation(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse({"error": validation_line(exc.errors())}, status_code=422)

    async def http(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        return JSONResponse({"error": one_line(exc.detail)}, status_code=exc.status_code, headers=exc.headers)

    async def thoth(_: Request, exc: Exception) -> JSONResponse:
        status = 400
        if isinstance(exc, ScopeError) and "refused" in str(exc) or isinstance(exc, ApprovalRefused):
            status = 403
        elif isinstance(exc, ModelNotConfigured):
            status = 503
        elif not isinstance(exc, InputError | ScopeError) and str(exc).startswith("no pending item"):
            status = 404
        return JSONResponse({"error": one_line(exc)}, status_code=status)

    async def crash(_: Request, exc: Exception) -> JSONResponse:
        logger.error("thoth serve: request failed", exc_info=exc)
        return JSONResponse({"error": one_line(f"{type(exc).__name__}: {exc}")}, status_code=500)

    app.add_exception_handler(RequestValidationError, validation)
    app.add_exception_handler(StarletteHTTPException, http)
    app.add_exception_handler(ThothError, thoth)
    app.add_exception_handler(Exception, crash)


def validation_line(errors: Any) -> str:
    """The first validation error as `where: what (got VALUE)`, e.g. `body.text: Field required`."""
    if not errors:
        return "invalid request"
    first = errors[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body") or "body"
    got = first.get("input")
    shown = "" if got is None or isinstance(got, dict) else f" (got {str(got)[:40]!r})"
    more = f"; and {len(errors) - 1} more" if len(errors) > 1 else ""
    return one_line(f"{where}: {first.get('msg', 'invalid')}{shown}{more}")


__all__ = ["config_file", "create_app", "from_environment", "validation_line"]
