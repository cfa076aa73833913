"""Helpers of the service's tests (and of anyone testing a route plugin): real `thoth serve` processes, SSE parsing.

`Server` starts `thoth serve --port 0` on an agent home made by `make_home` (`thoth init`, the replay
model) and reads the one `THOTH_URL=` line of its stdout; `client_of` is an httpx client of the
app over a runtime, in-process (`httpx.ASGITransport`: no lifespan, no socket).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core.testing import run_thoth

from .app import create_app
from .options import ServeOptions

if TYPE_CHECKING:
    import httpx

    from thoth_core import Runtime

START_TIMEOUT = 90.0
BASE = "http://127.0.0.1:8766"
LAYERS = ("working", "identity", "procedural", "episodic")
PROCESS_PLUGINS = ",".join(
    [name for name in LAYERS if importlib.util.find_spec(f"thoth_{name}") is not None] + ["mcp", "serve"]
)
REPLY = "Hello there, my good friend"


def plugins() -> dict[str, object]:
    """The installed layers an in-process test runtime gets (module by name)."""
    return {
        name: importlib.import_module(f"thoth_{name}.plugin")
        for name in LAYERS
        if importlib.util.find_spec(f"thoth_{name}") is not None
    }


def client_of(runtime: Runtime, **options: Any) -> httpx.AsyncClient:
    """An httpx client of the service app serving this runtime, in-process."""
    import httpx

    app = create_app(runtime=runtime, options=ServeOptions(**options))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE, timeout=60)


def sse_events(text: str) -> list[tuple[str, Any]]:
    """(event, data) of each server-sent event in a body."""
    events = []
    for chunk in text.split("\n\n"):
        lines = [line for line in chunk.splitlines() if not line.startswith(":")]
        name = next((line[7:] for line in lines if line.startswith("event: ")), None)
        data = next((line[6:] for line in lines if line.startswith("data: ")), None)
        if name is not None:
            events.append((name, json.loads(data) if data else None))
    return events


# --- real processes ---------------------------------------------------------------------


def thoth_command() -> list[str]:
    """The `thoth` console script of this environment."""
    script = Path(sys.executable).with_name("thoth")
    return [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]


def make_home(root: Path, *, extra: str = "", replies: list[dict[str, Any]] | None = None) -> Path:
    """An agent home by `thoth init` answering with the replay model (REPLY, a word every 10 ms)."""
    home = root / "agent"
    result = run_thoth("init", str(home), cwd=root, env={"THOTH_CONFIG": None, "THOTH_HOME": None})
    assert result.returncode == 0, result.stderr
    (home / "replay.json").write_text(json.dumps(replies or [{"reply": REPLY}]))
    config = (home / "thoth.toml").read_text().replace("[thoth]\n", '[thoth]\nmodel = "replay"\nowner = "ann"\n', 1)
    config += f'\n[models.replay]\nfile = "replay.json"\ndelay = 0.01\n{extra}'
    (home / "thoth.toml").write_text(config)
    return home


def base_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `thoth` process on this home (nothing of the test's own THOTH_*)."""
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(THOTH_CONFIG=str(home / "thoth.toml"), THOTH_LOAD_PLUGINS=PROCESS_PLUGINS, **extra)
    env["XDG_STATE_HOME"] = str(home.parent / "state")
    env.pop("THOTH_HOME", None)
    return env


class Server:
    """`thoth serve --port 0 ARGS` as a subprocess: its URL (from the THOTH_URL line) and stderr log."""

    def __init__(self, home: Path, *args: str, token: str | None = None, env: dict[str, str] | None = None) -> None:
        self.home = home
        self.token = token
        self.log_path = home.parent / f"serve-{time.monotonic_ns()}.log"
        self._log = self.log_path.open("w")
        environ = base_env(home, **({"THOTH_TOKEN": token} if token else {}), **(env or {}))
        self.process = subprocess.Popen(
            [*thoth_command(), "serve", "--port", "0", *args],
            cwd=home,
            env=environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self.lines: list[str] = []
        self._url = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()
        if not self._url.wait(START_TIMEOUT):
            self.stop()
            raise AssertionError(f"thoth serve did not print THOTH_URL: {self.log()}")
        self.url = self.lines[0].removeprefix("THOTH_URL=")

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))
            self._url.set()
        self._url.set()

    def log(self) -> str:
        return self.log_path.read_text() if self.log_path.exists() else ""

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None) -> Any:
        """(status, JSON or text) of one request over TCP, with the token unless headers say otherwise."""
        data = json.dumps(body).encode() if body is not None else None
        sent = {"Content-Type": "application/json", **(self.headers() if headers is None else headers)}
        request = urllib.request.Request(self.url + path, data=data, method=method, headers=sent)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw = response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            status, raw = exc.code, exc.read().decode()
        try:
            return status, json.loads(raw)
        except ValueError:
            return status, raw

    def stop(self) -> int:
        """SIGTERM, then wait (killed if it lingers); the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode



__all__ = ["BASE", "REPLY", "Server", "client_of", "make_home", "plugins", "sse_events"]
