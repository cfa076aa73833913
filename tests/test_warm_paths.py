"""The warm paths against the real `thoth serve`: each command's output as a client equals its output in-process.

One agent home (`thoth init`, the anthropic provider at the local fake Messages API), one real
`thoth serve --port 0` process for it, shared by the module's tests; every command runs as a real
`thoth` process twice, as the service's thin client and in-process (`THOTH_NO_SERVICE=1`), and the
two outputs are compared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # a real service process and many thoth processes
pytest.importorskip("thoth_serve")

THOTH = Path(sys.executable).with_name("thoth")
REPLY = "Noted: the staging database is on port 6543 now."
PEER = "ana"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An agent home with its service running, shared by the module's tests; yields the home (every command's cwd)."""
    from thoth_core.testing.fake_anthropic import FakeAnthropic

    fake = FakeAnthropic().start()
    fake.replies = [REPLY]
    home = tmp_path_factory.mktemp("warm") / "agent"
    with pytest.MonkeyPatch.context() as patch:
        for name in ("THOTH_HOME", "THOTH_LOAD_PLUGINS"):
            patch.delenv(name, raising=False)
        patch.setenv("ANTHROPIC_API_KEY", "test-key")
        assert run_thoth("init", str(home)).returncode == 0
        for key, value in (("thoth.model", "anthropic"), ("models.anthropic.base_url", fake.url)):
            assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
        for key in ("thoth.deadline", "plugins.claude-code.budget"):  # a loaded CI machine: no plugin skipped for time
            assert run_thoth("config", "set", key, "60", cwd=home).returncode == 0
        assert run_thoth("config", "set", "plugins.claude-code.peer", PEER, cwd=home).returncode == 0
        service = subprocess.Popen(
            [str(THOTH), "serve", "--port", "0"],
            cwd=home,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            assert service.stdout is not None
            line = service.stdout.readline()
            assert line.startswith("THOTH_URL="), line
            assert (home / ".thoth" / "run" / "service.json").exists()
            yield home
        finally:
            os.killpg(service.pid, signal.SIGINT)
            service.wait(60)
            fake.stop()
    assert not (home / ".thoth" / "run" / "service.json").exists()  # the advertisement goes with the service


@pytest.fixture(autouse=True)
def in_the_home(served: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test runs its commands from the agent home, with the key the provider needs."""
    monkeypatch.chdir(served)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    for name in ("THOTH_HOME", "THOTH_LOAD_PLUGINS"):
        monkeypatch.delenv(name, raising=False)


def both(*args: str, stdin: str | None = None) -> tuple[subprocess.CompletedProcess[str], ...]:
    """The command as the service's client, then in-process."""
    warm = run_thoth(*args, input=stdin, timeout=180)
    cold = run_thoth(*args, input=stdin, env={"THOTH_NO_SERVICE": "1"}, timeout=180)
    return warm, cold


def test_ask_context_and_recall_print_the_same_as_in_process(served):
    warm, cold = both("ask", "The staging database moved to port 6543.", "--peer", PEER)
    assert warm.returncode == cold.returncode == 0, (warm.stderr, cold.stderr)
    assert warm.stdout == cold.stdout == REPLY + "\n"
    as_json = both("context", "which port is staging on?", "--peer", PEER, "--thread", "other", "--json")
    assert as_json[0].returncode == as_json[1].returncode == 0
    warm_blocks, cold_blocks = (json.loads(done.stdout)["blocks"] for done in as_json)
    assert [(b["plugin"], b["tag"]) for b in warm_blocks] == [(b["plugin"], b["tag"]) for b in cold_blocks]
    as_text = both("context", "which port is staging on?", "--peer", PEER, "--thread", "other")
    assert as_text[0].returncode == as_text[1].returncode == 0
    assert as_text[0].stdout == as_text[1].stdout and "6543" in as_text[0].stdout
    deadline = time.monotonic() + 60
    while True:  # the episodes' vectors are written in the background: the same once both see them
        warm, cold = both("recall", "staging database port", "--peer", PEER)
        if (warm.stdout == cold.stdout and "by meaning" in warm.stdout) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout and "The staging database" in warm.stdout


def test_a_bad_peer_and_an_empty_message_read_the_same(served):
    for args in (("ask", "hi", "--peer", "not a name"), ("ask", "   ", "--peer", PEER)):
        warm, cold = both(*args)
        assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr), args


def test_the_claude_code_hook_gives_the_same_context_warm(served):
    from thoth_claude_code.testing import hook_input

    run_thoth("ask", "Remember: the office wifi password is Basil42.", "--peer", PEER)

    def stdin(session: str) -> str:  # a new Claude Code session each: both get the first prompt's recall
        return hook_input("UserPromptSubmit", session, served / "t.jsonl", cwd=served, prompt="office wifi?")

    warm = run_thoth("claude-code", "hook", "UserPromptSubmit", input=stdin("cc-1"))
    cold = run_thoth("claude-code", "hook", "UserPromptSubmit", input=stdin("cc-2"), env={"THOTH_NO_SERVICE": "1"})
    assert warm.returncode == cold.returncode == 0
    assert warm.stdout == cold.stdout and "Basil42" in warm.stdout


def test_thoth_mcp_over_stdio_relays_to_the_service(served):
    import asyncio

    from mcp import ClientSession, StdioServerParameters, stdio_client

    async def tools() -> list[str]:
        params = StdioServerParameters(command=str(THOTH), args=["mcp"], env=dict(os.environ), cwd=str(served))
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            listed = await session.list_tools()
            remembered = await session.call_tool("remember", {"text": "my cat is called Tom", "peer": PEER})
            assert not remembered.is_error
            return sorted(tool.name for tool in listed.tools)

    assert "recall" in asyncio.run(tools())
