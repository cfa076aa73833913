"""Warm hooks: with a service running for the home, the hook process is its client, with the same output.

The service here is this plugin's route (`warm.hook_route`, what `serve_routes` registers on `thoth
serve`) in a small Starlette app on uvicorn in a thread of the test process, whose lifespan loads the
runtime as the real service does; the hook runs as Claude Code runs it, a process.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from thoth_claude_code.testing import hook_input

from thoth_core.scope import Scope
from thoth_core.service import advertised
from thoth_core.testing import run_thoth

HEAVY = ("click", "pluggy", "pydantic", "thoth_core.runtime", "thoth_core.config", "numpy", "onnxruntime")


@contextmanager
def warm_service(home: Path, config: Path, scope: Scope | None = None) -> Iterator[list[Any]]:
    """The hook route on a loaded runtime, advertised for the home; yields a list that holds the runtime."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from thoth_claude_code.warm import hook_route

    from thoth_core import Runtime

    held: list[Any] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        runtime = Runtime.load(config)
        held.append(runtime)
        app.router.routes.append(hook_route(runtime, scope or Scope()))
        yield
        await runtime.aclose()

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))

    async def health(request: Any) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    app = Starlette(routes=[Route("/v1/health", health)], lifespan=lifespan)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.01)
    try:
        with advertised(home, url=f"http://127.0.0.1:{sock.getsockname()[1]}", token=None):
            yield held
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def hook_process(event: str, stdin: str, cwd: Path, **env: str | None) -> subprocess.CompletedProcess[str]:
    return run_thoth("claude-code", "hook", event, input=stdin, cwd=cwd, env=dict(env), timeout=120)


@pytest.fixture
def roomy(agent: Path) -> None:
    """A budget no loaded machine runs out of, for comparing the content both ways (before the service starts)."""
    for key in ("plugins.claude-code.budget", "thoth.deadline"):
        assert run_thoth("config", "set", key, "120").returncode == 0


@pytest.fixture
def warm(agent: Path, monkeypatch) -> Iterator[list[Any]]:
    monkeypatch.delenv("THOTH_LOAD_PLUGINS", raising=False)  # the thin path stands aside under an allow-list
    with warm_service(agent / ".thoth", agent / "thoth.toml") as held:
        yield held


def test_the_warm_hook_records_and_recalls_as_in_process(agent, roomy, hooks, warm):
    log = hooks.transcript("s-1")
    log.turn("The staging database moved to port 6543 on Monday.", "Noted: staging is on 6543 now.")
    stop = hook_process("Stop", hook_input("Stop", "s-1", log.path, cwd=hooks.project), hooks.project)
    assert (stop.returncode, stop.stdout, stop.stderr) == (0, "", "")
    ask = hook_input("UserPromptSubmit", "s-2", hooks.project / "s-2.jsonl", cwd=hooks.project, prompt="staging port?")
    warm_run = hook_process("UserPromptSubmit", ask, hooks.project)
    cold_run = hook_process("UserPromptSubmit", ask.replace("s-2", "s-3"), hooks.project, THOTH_NO_SERVICE="1")
    assert warm_run.returncode == cold_run.returncode == 0
    assert "6543" in warm_run.stdout
    warm_context = json.loads(warm_run.stdout)["hookSpecificOutput"]["additionalContext"]
    assert cold_run.stdout, cold_run.stderr
    cold_context = json.loads(cold_run.stdout)["hookSpecificOutput"]["additionalContext"]
    assert warm_context == cold_context  # the same recall content both ways
    stop_input = hook_input("Stop", "s-1", log.path, cwd=hooks.project)
    again = hook_process("Stop", stop_input, hooks.project, THOTH_NO_SERVICE="1")
    assert again.returncode == 0  # recorded once: the in-process Stop finds the turn in the ledger
    runtime = warm[0]
    assert runtime is not None


PROBE = """
import json, sys
from thoth_core.thin import run_thin
code = run_thin(sys.argv[1:])
sys.stdout.flush()
print(json.dumps({"code": code, "heavy": [m for m in %s if m in sys.modules]}), file=sys.stderr)
"""


def test_the_hook_process_imports_neither_the_runtime_nor_the_embedder(agent, hooks, warm):
    ask = hook_input("UserPromptSubmit", "s-9", hooks.project / "s-9.jsonl", cwd=hooks.project, prompt="hello?")
    done = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,), "claude-code", "hook", "UserPromptSubmit"],
        input=ask,
        capture_output=True,
        text=True,
        cwd=hooks.project,
        timeout=60,
    )
    assert json.loads(done.stderr.strip().splitlines()[-1]) == {"code": 0, "heavy": []}


def test_bad_stdin_is_the_same_line_warm(agent, hooks, warm):
    done = hook_process("UserPromptSubmit", "this is not json", hooks.project)
    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        "thoth claude-code hook UserPromptSubmit: stdin: not valid JSON (Expecting value at line 1 column 1)\n"
    )
    unknown = hook_process("PreToolUse", '{"session_id": "s"}', hooks.project)
    assert "unknown event 'PreToolUse'; Thoth handles SessionStart, UserPromptSubmit, Stop, SessionEnd" in (
        unknown.stderr
    )


def test_a_pinned_service_leaves_the_hook_in_process(agent, hooks, monkeypatch):
    monkeypatch.delenv("THOTH_LOAD_PLUGINS", raising=False)
    with warm_service(agent / ".thoth", agent / "thoth.toml", Scope(peer="someone-else")):
        ask = hook_input("UserPromptSubmit", "s-4", hooks.project / "s-4.jsonl", cwd=hooks.project, prompt="hi")
        done = hook_process("UserPromptSubmit", ask, hooks.project)
    assert done.returncode == 0 and "Traceback" not in done.stderr  # answered in-process, stdin put back


def test_a_hung_service_falls_back_in_process_within_the_wait(agent, roomy, hooks, monkeypatch):
    monkeypatch.delenv("THOTH_LOAD_PLUGINS", raising=False)
    log = hooks.transcript("s-5")
    log.turn("Remember the blue door code is 4242.", "Got it.")
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)
        with advertised(agent / ".thoth", url=f"http://127.0.0.1:{hung.getsockname()[1]}", token=None):
            stop = hook_process("Stop", hook_input("Stop", "s-5", log.path, cwd=hooks.project), hooks.project)
            started = time.monotonic()
            ask = hook_input("UserPromptSubmit", "s-6", hooks.project / "s-6.jsonl", cwd=hooks.project, prompt="x")
            prompt = hook_process("UserPromptSubmit", ask, hooks.project)
            waited = time.monotonic() - started
    assert stop.returncode == 0 and "Traceback" not in stop.stderr  # in-process (its start-up warnings aside)
    assert prompt.returncode == 0 and waited < 30
    later = hook_input("UserPromptSubmit", "s-7", hooks.project / "s-7.jsonl", cwd=hooks.project, prompt="door code?")
    recalled = hook_process("UserPromptSubmit", later, hooks.project)
    assert "4242" in recalled.stdout  # no lost turn: the Stop that found the service hung recorded it in-process
