"""The service side of the warm hooks: `POST /claude-code/hook/EVENT` on `thoth serve` does what the hook does.

The hook process (`thin.py`) sends `{"stdin": the hook input, "age": seconds since the process
started, "wait": --wait}`; the answer is `{"output": what the hook prints, "error": its stderr line
or null, "warning": a log line or null}`, with the same work as in-process (`commands.run_hook`) on
the service's loaded runtime: the context hooks within their budget counted from the hook process's
start, Stop recording the finished turns, SessionEnd ending the session in the background (as the
in-process hook hands it to a detached process). A service pinned to another peer or to a workspace
answers 409, and the hook process works in-process.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from thoth_core import ThothError

from . import install as settings_file
from .hooks import Payload, end_session, prompt_context, record_finished_turns, session_start_context
from .settings import Settings
from .thin import ROUTE

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from thoth_core import Runtime
    from thoth_core.scope import Scope

logger = logging.getLogger(__name__)
CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")


async def answer(
    runtime: Runtime, event: str, stdin: str, *, age: float, wait: bool, tasks: set[Any]
) -> dict[str, Any]:
    """What the hook prints for this input: {"output", "error", "warning"}."""
    if event not in settings_file.EVENTS:
        raise ThothError(f"unknown event {event!r}; Thoth handles {', '.join(settings_file.EVENTS)}")
    payload = Payload.parse(event, stdin)
    settings = Settings.of(runtime.config)
    if event in CONTEXT_EVENTS:
        budget = settings.budget if event == "UserPromptSubmit" else settings.start_budget
        until = time.monotonic() - max(0.0, age) + budget
        make = prompt_context if event == "UserPromptSubmit" else session_start_context
        work = asyncio.ensure_future(make(runtime, payload, settings, until=until))
        done, _ = await asyncio.wait({work}, timeout=max(0.0, until - time.monotonic()))
        if not done:  # as in-process: what is not ready at the budget is given up on (left to finish)
            tasks.add(work)
            work.add_done_callback(tasks.discard)
            work.add_done_callback(lambda w: w.cancelled() or w.exception())
            warning = f"claude-code: {event} context not ready within its budget; none given"
            return {"output": "", "error": None, "warning": warning}
        return {"output": work.result(), "error": None, "warning": None}
    if event == "SessionEnd" and not wait:
        ending = asyncio.ensure_future(end_session(runtime, payload, settings))
        tasks.add(ending)
        ending.add_done_callback(tasks.discard)
        ending.add_done_callback(ended)
        return {"output": "", "error": None, "warning": None}
    work_for = record_finished_turns if event == "Stop" else end_session
    await work_for(runtime, payload, settings)
    return {"output": "", "error": None, "warning": None}


def ended(task: asyncio.Future[Any]) -> None:
    """Log a background SessionEnd that failed (in-process it would be the detached process's log)."""
    if not task.cancelled() and task.exception() is not None:
        logger.warning("claude-code: SessionEnd failed: %s", task.exception())


def hook_route(runtime: Runtime, scope: Scope) -> Route:
    """The route `serve_routes` registers: `POST /claude-code/hook/{event}`."""
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    tasks: set[Any] = set()  # context work past its budget and SessionEnds still running

    async def hook(request: Request) -> JSONResponse:
        settings = Settings.of(runtime.config)
        if scope.workspace is not None or scope.peer not in (None, settings.peer):
            return JSONResponse({"error": f"this service is pinned ({scope}); the hook runs in-process"}, 409)
        body = await request.json()
        if not isinstance(body, dict) or not isinstance(body.get("stdin"), str):
            return JSONResponse({"error": 'body: expected {"stdin": the hook input, "age", "wait"}'}, 422)
        age = float(body["age"]) if isinstance(body.get("age"), int | float) else 0.0
        event = request.path_params["event"]
        try:
            return JSONResponse(
                await answer(runtime, event, body["stdin"], age=age, wait=body.get("wait") is True, tasks=tasks)
            )
        except ThothError as exc:
            return JSONResponse({"output": "", "error": str(exc), "warning": None})
        except Exception as exc:  # noqa: BLE001 - as in-process: one line, and the prompt goes on
            logger.debug("hook %s failed", event, exc_info=True)
            return JSONResponse({"output": "", "error": f"{type(exc).__name__}: {exc}", "warning": None})

    return Route(ROUTE + "{event}", hook, methods=["POST"])


__all__ = ["answer", "hook_route"]
