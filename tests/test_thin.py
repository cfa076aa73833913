"""The `thoth` command as a thin client of a running service: what it imports, what it prints, when it falls back.

The service here is a small Starlette app on uvicorn (a thread of the test process, so its pid is
alive) speaking the /v1 routes of thoth serve that the thin paths use; the real service is tested
in plugins/serve and in tests/test_warm_paths.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thoth_core.service import advertised
from thoth_core.testing import run_thoth
from thoth_core.thin import parse_args

HEAVY = ("click", "pluggy", "pydantic", "thoth_core.runtime", "thoth_core.config", "numpy", "onnxruntime", "anthropic")


class FakeService:
    """The /v1 routes the thin paths call, answering from canned data and recording what they were sent."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, dict[str, Any]]] = []
        self.deltas = ["Hello ", "from ", "the service."]
        self.break_turn = False
        self.context: dict[str, Any] = {
            "peer": "ana",
            "workspace": "default",
            "thread": "cli",
            "blocks": [{"plugin": "identity", "layer": "identity", "tag": "user-model", "text": "Ana", "tokens": 3}],
            "cut": [
                {"plugin": "episodic", "layer": "episodic", "tag": "e", "tokens": 9, "kept_tokens": 4, "reason": "r"}
            ],
            "calls": [{"plugin": "working", "hook": "context", "seconds": 0.1, "status": "timeout", "error": "slow"}],
            "tokens": 3,
            "budget": 6000,
            "system": "<user-model>\nAna\n</user-model>",
        }

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, StreamingResponse
        from starlette.routing import Route

        async def health(request: Request) -> JSONResponse:
            return JSONResponse({"status": "ok", "pid": 1, "peer": None, "workspace": "default"})

        async def turns(request: Request) -> StreamingResponse:
            body = await request.json()
            self.seen.append(("turns", request.url.path + "?" + request.url.query, body))

            async def stream() -> Any:
                for piece in self.deltas:
                    yield f"event: delta\ndata: {json.dumps({'text': piece})}\n\n".encode()
                    await asyncio.sleep(0.01)
                if self.break_turn:
                    raise RuntimeError("the service died mid-turn")
                reply = "".join(self.deltas)
                done = {"reply": reply, "turn_id": "t1", "model": "fake", "usage": {}, "cut_short": False}
                yield f"event: done\ndata: {json.dumps(done)}\n\n".encode()

            return StreamingResponse(stream(), media_type="text/event-stream")

        async def context(request: Request) -> JSONResponse:
            body = await request.json()
            self.seen.append(("context", request.url.path + "?" + request.url.query, body))
            return JSONResponse(self.context)

        return Starlette(
            routes=[
                Route("/v1/health", health),
                Route("/v1/peers/{peer}/turns", turns, methods=["POST"]),
                Route("/v1/peers/{peer}/context", context, methods=["POST"]),
            ]
        )


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """The app on uvicorn in a thread at an ephemeral loopback port; its URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def home(thoth_env: Path, thoth_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The data home; every plugin loadable (the thin paths stand aside under a plugin allow-list)."""
    monkeypatch.delenv("THOTH_LOAD_PLUGINS", raising=False)
    return thoth_home


@pytest.fixture
def fake(home: Path) -> Iterator[FakeService]:
    service = FakeService()
    with serving(service.app()) as url, advertised(home, url=url, token=None):
        yield service


PROBE = """
import json, sys
from thoth_core.thin import run_thin
code = run_thin(sys.argv[1:])
sys.stdout.flush()
heavy = [m for m in json.loads(sys.stdin.read() or "[]") if m in sys.modules]
print(json.dumps({"code": code, "heavy": heavy, "count": len(sys.modules)}), file=sys.stderr)
"""


def thin_probe(*args: str) -> tuple[str, dict[str, Any]]:
    """Run the thin path alone in a fresh process: its stdout, and its exit code and heavy modules loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], input=json.dumps(HEAVY), capture_output=True, text=True, timeout=60
    )
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


def test_ask_streams_the_services_reply_without_importing_the_runtime(fake):
    stdout, probe = thin_probe("ask", "hello there", "--peer", "ana", "--workspace=team")
    assert stdout == "Hello from the service.\n"
    assert (probe["code"], probe["heavy"]) == (0, [])
    floor = subprocess.run(
        [sys.executable, "-c", "import sys; print(len(sys.modules))"], capture_output=True, text=True
    )
    # what the client adds to the interpreter's own start-up (json, socket,
    # tomllib, logging for the printable stream); the runtime's path imports over a thousand
    assert probe["count"] - int(floor.stdout) < 100, probe["count"]
    sent = {"text": "hello there", "thread": "cli", "saved": True}
    assert fake.seen == [("turns", "/v1/peers/ana/turns?workspace=team", sent)]


def test_the_console_script_answers_through_the_service(fake):
    done = run_thoth("ask", "hi", "--peer", "ana", "--thread", "t9")
    assert (done.returncode, done.stdout, done.stderr) == (0, "Hello from the service.\n", "")
    assert fake.seen[-1][2] == {"text": "hi", "thread": "t9", "saved": True}


def test_context_prints_the_prompt_and_its_summary_as_in_process(fake):
    done = run_thoth("context", "what changed?", "--peer", "ana")
    assert done.returncode == 0
    assert done.stdout == "<user-model>\nAna\n</user-model>\n"
    assert done.stderr == (
        "\n-- 3/6000 tokens from 1 blocks\n-- cut episodic/e: 9 -> 4 tokens (r)\n-- working: timeout (slow)\n"
    )
    as_json = run_thoth("context", "what changed?", "--peer", "ana", "--json")
    assert list(json.loads(as_json.stdout)) == ["blocks", "cut", "calls", "tokens", "budget"]


def test_escape_sequences_from_the_service_are_made_printable(fake):
    fake.deltas = ["bad \x1b[31mred\x1b[0m"]
    done = run_thoth("ask", "hi", "--peer", "ana")
    assert "\x1b" not in done.stdout and "red" in done.stdout


def test_a_turn_broken_off_after_it_was_sent_is_not_run_again(fake):
    fake.break_turn = True
    done = run_thoth("ask", "hi", "--peer", "ana")
    assert done.returncode == 2
    assert done.stdout == "Hello from the service."
    assert done.stderr.startswith("thoth: error: the service ")  # stopped answering, or ended without the reply
    assert len(fake.seen) == 1


def test_what_the_thin_path_does_not_know_runs_in_process(fake):
    for args in (["ask", "/help", "--peer", "ana"], ["ask", "hi", "--verbose"], ["context", "--help"]):
        _, probe = thin_probe(*args)
        assert probe["code"] is None, args
    assert fake.seen == []


def test_a_stale_advertisement_falls_back_in_process(home):
    pid = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True).stdout)
    (home / "run").mkdir()
    (home / "run" / "service.json").write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": pid, "token": None}))
    done = run_thoth("context", "hi", "--peer", "ana")
    assert done.returncode == 0 and "(no context blocks)" in done.stdout  # the in-process answer


def test_a_hung_service_falls_back_in_process_after_a_bounded_wait(home):
    with socket.socket() as hung:
        hung.bind(("127.0.0.1", 0))
        hung.listen(8)  # the kernel accepts connections; nobody answers
        with advertised(home, url=f"http://127.0.0.1:{hung.getsockname()[1]}", token=None):
            started = time.monotonic()
            _, probe = thin_probe("context", "hi", "--peer", "ana")
            assert probe["code"] is None  # the caller (main) runs it in-process
            assert time.monotonic() - started < 5
            done = run_thoth("context", "hi", "--peer", "ana")
    assert done.returncode == 0 and "(no context blocks)" in done.stdout


def test_no_service_switch_runs_in_process(fake, monkeypatch):
    monkeypatch.setenv("THOTH_NO_SERVICE", "1")
    done = run_thoth("context", "hi", "--peer", "ana")
    assert "(no context blocks)" in done.stdout and fake.seen == []


names = st.text(alphabet="abcdefghij-_0123456789", min_size=1, max_size=8)


@given(
    st.dictionaries(st.sampled_from(["--peer", "--thread", "--workspace"]), names),
    st.booleans(),
    st.text(min_size=1, max_size=20).filter(lambda t: not t.startswith("-")),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_parse_args_reads_back_any_order_and_spelling(options, flag, message, equals, rnd):
    parts: list[list[str]] = [[f"{k}={v}"] if equals else [k, v] for k, v in options.items()]
    parts += [["--json"]] * flag + [[message]]
    rnd.shuffle(parts)
    args = [a for part in parts for a in part]
    parsed = parse_args(args, values=("--peer", "--thread", "--workspace"), flags=("--json",), positional=1)
    assert parsed == ([message], {**options, **({"--json": True} if flag else {})})


@given(st.lists(st.text(max_size=12), max_size=6))
def test_parse_args_never_raises(args):
    parsed = parse_args(args, values=("--peer",), flags=("--json",), positional=1)
    assert parsed is None or len(parsed[0]) == 1


NAMES = st.sampled_from(["thoth", "home", "plugins", "model", "homepage", "x"])
VALUES = st.one_of(
    st.text(max_size=12), st.integers(), st.booleans(), st.lists(st.text(max_size=5), max_size=3)
)
TABLES = st.dictionaries(NAMES, st.one_of(VALUES, st.dictionaries(NAMES, VALUES, max_size=3)), max_size=4)


@given(document=st.dictionaries(NAMES, st.one_of(VALUES, TABLES), max_size=4), multiline=st.booleans())
def test_the_home_read_without_tomllib_is_tomllib_s_or_none(document, multiline):
    """home_setting never names another home than the file's: it gives tomllib's `[thoth] home`, or None."""
    import tomllib

    import tomlkit

    from thoth_core.thin import home_setting

    text = tomlkit.dumps(document)
    if multiline:  # arrays over several lines, as people write them
        text = text.replace(", ", ",\n    ")
    try:
        parsed = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return
    thoth = parsed.get("thoth")
    expected = thoth.get("home") if isinstance(thoth, dict) else None
    found = home_setting(text)
    assert found is None or found == expected, (text, found, expected)


def test_the_home_of_a_new_agent_home_is_read_without_tomllib(tmp_path):
    import tomllib

    from thoth_core.thin import home_setting

    assert run_thoth("init", str(tmp_path / "agent")).returncode == 0
    text = (tmp_path / "agent" / "thoth.toml").read_text()
    assert home_setting(text) == tomllib.loads(text)["thoth"]["home"]
    tricky_files = ('[thoth]\nhome = "a\\"b"\n', "thoth.home = 'x'\n", '[thoth]\nhome = """x"""\n')
    for tricky in (*tricky_files, "[thoth]\nhome = 3\n"):
        assert home_setting(tricky) is None, tricky
    assert home_setting("[thoth]  # the core\nhome = 'data'  # here\n[plugins]\nhome = 'other'\n") == "data"
