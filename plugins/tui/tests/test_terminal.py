"""`thoth chat` in a real terminal: tmux runs the installed console script against the fake Messages API."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(
        shutil.which("tmux") is None,
        reason="tmux is not installed (apt-get install tmux); the real-terminal test needs it",
    ),
    pytest.mark.slow,  # spawns thoth in a real terminal
]


class Terminal:
    """A detached tmux session on its own server socket, so nothing else of the user's is touched."""

    def __init__(self, width: int = 100, height: int = 30) -> None:
        self.socket = f"thoth-tui-test-{uuid.uuid4().hex[:8]}"
        self.size = (width, height)

    def tmux(self, *args: str) -> str:
        # COLUMNS/LINES (pytest may set them) would override the terminal's real size.
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        return subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=True, timeout=20, env=env
        ).stdout

    def start(self, command: str, env: dict[str, str]) -> None:
        options = [item for name, value in env.items() for item in ("-e", f"{name}={value}")]
        self.tmux(
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "chat",
            "-x",
            str(self.size[0]),
            "-y",
            str(self.size[1]),
            *options,
            command,
        )

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "chat")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "chat", *keys)

    def wait_for(self, text: str, seconds: float = 30.0) -> str:
        """The screen once it shows text (a generous deadline for a loaded machine)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared; the screen was:\n{self.screen()}")

    def close(self) -> None:
        """Stop the tmux server and remove its socket file."""
        found = subprocess.run(
            ["tmux", "-L", self.socket, "display", "-p", "#{socket_path}"], capture_output=True, text=True, timeout=20
        )
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)
        if found.stdout.strip():
            Path(found.stdout.strip()).unlink(missing_ok=True)


@pytest.fixture
def terminal():
    made = Terminal()
    yield made
    made.close()


def test_thoth_chat_in_tmux(terminal, fake_anthropic, tmp_path):
    fake_anthropic.replies = [{"match": "hello", "reply": "Hello from **Claude**, streamed."}]
    thoth = Path(sys.executable).with_name("thoth")
    # A fresh install: no thoth.toml, an empty THOTH_HOME, the model found from the environment.
    env = {
        "THOTH_HOME": str(tmp_path / "home"),
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": "test-key",
        "TERM": "xterm-256color",
        "HONCHO_DISABLED": "true",  # the identity layer switched off: the panel must say so
    }
    terminal.start(f"cd {tmp_path} && {thoth} chat --peer ann --thread tmux; echo EXITED $?; sleep 60", env)

    screen = terminal.wait_for("Message Thoth")
    assert "ann · thread tmux · model anthropic" in screen
    assert "L1 working" in screen and "pending approvals" in screen  # 100 columns: the layers panel is open
    identity = "disabled" if importlib.util.find_spec("thoth_identity") else "not installed"
    rows = screen.splitlines()
    row = next(i for i, line in enumerate(rows) if "L2 identity · Binah" in line)
    assert f"  {identity}" in rows[row + 1]  # the state goes on the line under the title

    terminal.keys("hello there", "Enter")
    screen = terminal.wait_for("Hello from Claude, streamed.")
    assert "hello there" in screen
    terminal.wait_for("turns 1")  # the turn is over: the layers panel refreshes last (until then, "Still answering")

    terminal.keys("/hel", "Tab", "Enter")
    terminal.wait_for("/whoami - who and where you are")

    terminal.keys("C-q")
    terminal.wait_for("EXITED 0")
    turns = [r for r in fake_anthropic.messages_requests if r.body["messages"][-1]["content"] == "hello there"]
    assert turns and turns[0].body["stream"] is True  # later requests may be installed layers' (reflection at exit)
    assert (tmp_path / "home" / "tui" / "history" / "ann.txt").read_text().splitlines() == ["hello there", "/help"]
