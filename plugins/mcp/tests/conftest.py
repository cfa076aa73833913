"""A tmp agent home made by `thoth init`, and `thoth mcp` servers the `mcp` SDK's own client talks to.

Each server is a real subprocess over stdio, shared by the tests of a module. The client lives
on its own event loop in a background thread (anyio contexts must be entered and left in one
task), and tests call it synchronously through `Connection.call`.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from thoth_core.testing import run_thoth

URL_LINE = re.compile(r"thoth mcp: streamable HTTP at (http://127\.0\.0\.1:\d+/mcp)")
START_TIMEOUT = 60.0
NEEDED = ("working", "identity", "procedural")  # /remember and recall (identity), skills and persona (procedural)
OPTIONAL = ("episodic", "reflection")
PLUGINS = ",".join(
    [*NEEDED, *(name for name in OPTIONAL if importlib.util.find_spec(f"thoth_{name}") is not None), "mcp"]
)
CALL_TIMEOUT = 60.0


def thoth_command() -> list[str]:
    """The `thoth` console script of this environment (or the module, where there is no script)."""
    script = Path(sys.executable).with_name("thoth")
    return [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]


class AgentHome:
    """An agent home and the environment that points `thoth` at it (and only at it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / "agent"
        self.env = {
            "THOTH_CONFIG": str(self.path / "thoth.toml"),
            "THOTH_HOME": str(self.path / ".thoth"),
            "THOTH_LOAD_PLUGINS": PLUGINS,
        }

    def init(self) -> AgentHome:
        scrubbed: dict[str, str | None] = {"THOTH_CONFIG": None, "THOTH_HOME": None, "THOTH_LOAD_PLUGINS": PLUGINS}
        result = run_thoth("init", str(self.path), cwd=self.root, env=scrubbed)
        assert result.returncode == 0, result.stderr
        return self


class Connection:
    """A `ClientSession` to one `thoth mcp` subprocess, driven from a background event loop."""

    def __init__(self, home: AgentHome, *args: str) -> None:
        self.log_path = home.root / f"server-{'-'.join(args) or 'plain'}.log"
        self.params = StdioServerParameters(
            command=thoth_command()[0], args=[*thoth_command()[1:], "mcp", *args], env=home.env, cwd=str(home.root)
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-client", daemon=True)
        self.session: ClientSession | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._main: Any = None

    def start(self) -> Connection:
        self.thread.start()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(), self.loop)
        if not self._ready.wait(CALL_TIMEOUT) or self.session is None:
            self._main.result(timeout=1)  # raises what went wrong
            raise AssertionError(f"thoth mcp did not start; log: {self.log()}")
        return self

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        with self.log_path.open("w") as errlog:
            async with stdio_client(self.params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    self.session = session
                    self._ready.set()
                    await self._stop.wait()

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a ClientSession method (`call_tool`, `list_tools`, ...) and wait for its result."""
        assert self.session is not None
        work = getattr(self.session, method)(*args, **kwargs)
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(CALL_TIMEOUT)

    def tool(self, name: str, **arguments: Any) -> Any:
        """The result of one tool call."""
        return self.call("call_tool", name, arguments)

    @staticmethod
    def text(result: Any) -> str:
        """The text content of a tool result."""
        return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def stop(self) -> None:
        """Close the session and the subprocess (stdin closed, then terminated if it lingers)."""
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        if self._main is not None:
            self._main.result(CALL_TIMEOUT)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(CALL_TIMEOUT)
        self.loop.close()


@pytest.fixture(scope="module")
def agent_home(tmp_path_factory: pytest.TempPathFactory) -> AgentHome:
    """A fresh agent home for this module's servers."""
    for name in NEEDED:
        pytest.importorskip(f"thoth_{name}", reason=f"the MCP tools are tested over the {name} layer")
    return AgentHome(tmp_path_factory.mktemp("mcp")).init()


@pytest.fixture(scope="module")
def server(agent_home: AgentHome) -> Iterator[Connection]:
    """`thoth mcp` over stdio, not pinned: every call names its peer."""
    connection = Connection(agent_home).start()
    try:
        yield connection
    finally:
        connection.stop()


@pytest.fixture(scope="module")
def alice_server(agent_home: AgentHome) -> Iterator[Connection]:
    """`thoth mcp --peer alice` over stdio, on the same home."""
    connection = Connection(agent_home, "--peer", "alice").start()
    try:
        yield connection
    finally:
        connection.stop()


class HttpServer:
    """`thoth mcp --http --port 0` as a subprocess, and the URL it printed."""

    def __init__(self, home: AgentHome, *args: str) -> None:
        self.log_path = home.root / f"http-server-{'-'.join(args) or 'plain'}-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("w")
        command = [*thoth_command(), "mcp", "--http", "--port", "0", *args]
        self.process = subprocess.Popen(
            command,
            cwd=home.root,
            env={**_base_env(), **home.env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
        )
        self.url = self._wait_for_url()

    def _wait_for_url(self) -> str:
        until = time.monotonic() + START_TIMEOUT
        while time.monotonic() < until:
            found = URL_LINE.search(self.log_path.read_text())
            if found:
                return found.group(1)
            if self.process.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise AssertionError(f"thoth mcp --http did not start: {self.log_path.read_text()}")

    def stop(self) -> int:
        """SIGTERM, then wait (killed if it lingers); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


def _base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    return {k: v for k, v in os.environ.items() if k in keep}


@pytest.fixture(scope="module")
def start_http_server(agent_home: AgentHome) -> Iterator[Callable[..., HttpServer]]:
    """Factory: `start_http_server(*args)` runs `thoth mcp --http --port 0 ARGS`; all are stopped at the end."""
    started: list[HttpServer] = []

    def start(*args: str) -> HttpServer:
        started.append(HttpServer(agent_home, *args))
        return started[-1]

    try:
        yield start
    finally:
        for server in started:
            server.stop()
