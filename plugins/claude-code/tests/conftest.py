"""An agent home made by `thoth init`, Claude Code's project folder, and a way to run the hook as Claude Code does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest
import thoth_claude_code.commands
from click.testing import CliRunner
from thoth_claude_code.testing import Transcript, hook_input

from thoth_core.cli import cli
from thoth_core.testing import run_thoth

PEER = "ann"


@pytest.fixture(autouse=True)
def hard_exits(thoth_env, monkeypatch) -> list[int]:
    """`thoth_env`, with this plugin among those loaded; a hook's hard exit is recorded here, not done."""
    exits: list[int] = []
    monkeypatch.setattr(thoth_claude_code.commands, "hard_exit", exits.append)
    loaded = os.environ.get("THOTH_LOAD_PLUGINS")
    if loaded is not None and "claude-code" not in loaded.split(","):
        monkeypatch.setenv("THOTH_LOAD_PLUGINS", f"{loaded},claude-code" if loaded else "claude-code")
    return exits


INITIALIZED: dict[str | None, Path] = {}  # per plugin allow-list: a home `thoth init` made in this test process


@pytest.fixture
def agent(tmp_path, tmp_path_factory, monkeypatch) -> Path:
    """An agent home made by `thoth init` (data in its .thoth/), named by THOTH_CONFIG, peer `ann`.

    `thoth init` runs once per test process (it holds no absolute path); each test gets a copy of that home.
    """
    loaded = os.environ.get("THOTH_LOAD_PLUGINS")
    if loaded not in INITIALIZED:
        made_home = tmp_path_factory.mktemp("initialized") / "agent"
        made = run_thoth("init", str(made_home), cwd=made_home.parent, env={"THOTH_HOME": None})
        assert made.returncode == 0, made.stderr
        INITIALIZED[loaded] = made_home
    home = tmp_path / "agent"
    shutil.copytree(INITIALIZED[loaded], home, symlinks=True)
    with (home / "thoth.toml").open("a", encoding="utf-8") as toml:
        toml.write(f'\n[plugins.claude-code]\npeer = "{PEER}"\n')
    monkeypatch.delenv("THOTH_HOME", raising=False)
    monkeypatch.setenv("THOTH_CONFIG", str(home / "thoth.toml"))
    return home


@pytest.fixture
def project(tmp_path, monkeypatch) -> Path:
    """Claude Code's project folder, the working directory its hooks run in."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


class Hooks:
    """Runs `thoth claude-code hook EVENT` in process (CliRunner) or as Claude Code does (a shell command)."""

    def __init__(self, project: Path) -> None:
        self.project = project

    def transcript(self, session_id: str) -> Transcript:
        """A new transcript file for a Claude Code session."""
        return Transcript(self.project / f"{session_id}.jsonl", session_id, cwd=str(self.project))

    def run(self, event: str, session_id: str, *extra: str, stdin: str | None = None, **fields):
        """The hook in process; returns click's Result."""
        text = (
            stdin
            if stdin is not None
            else hook_input(event, session_id, self.project / f"{session_id}.jsonl", cwd=self.project, **fields)
        )
        return CliRunner().invoke(cli, ["claude-code", "hook", event, *extra], input=text, catch_exceptions=False)

    def shell(
        self, command: str, event: str, session_id: str, *, stdin: str | None = None, env=None, timeout=120, **fields
    ):
        """A command from settings.json, run the way Claude Code runs it: `sh -c`, in the project folder."""
        text = (
            stdin
            if stdin is not None
            else hook_input(event, session_id, self.project / f"{session_id}.jsonl", cwd=self.project, **fields)
        )
        environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
        environ.pop("THOTH_CONFIG", None)  # the command itself names the agent home
        return subprocess.run(
            ["sh", "-c", command],
            input=text,
            capture_output=True,
            text=True,
            cwd=self.project,
            env=environ,
            timeout=timeout,
        )

    def commands(self, settings: Path | None = None) -> dict[str, str]:
        """Thoth's command for each event in a settings.json (default: the project's)."""
        data = json.loads((settings or self.project / ".claude" / "settings.json").read_text())
        return {
            event: hook["command"]
            for event, groups in data["hooks"].items()
            for group in groups
            for hook in group["hooks"]
            if "claude-code hook" in hook["command"]
        }


@pytest.fixture
def hooks(project) -> Hooks:
    return Hooks(project)


@pytest.fixture
def slow_plugins(tmp_path, monkeypatch) -> Path:
    """Two plugins installed on PYTHONPATH: `quick` gives a block at once, `slow` sleeps 60 s (plain or async)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "cc_quick_plugin.py").write_text(
        textwrap.dedent(
            """
            from thoth_core import ContextBlock, hookimpl

            @hookimpl
            def pre_spawn_context(turn):
                return ContextBlock(tag="quick-note", text="quick plugin was here")
            """
        )
    )
    (site / "cc_slow_plugin.py").write_text(
        textwrap.dedent(
            """
            import os, time
            from thoth_core import ContextBlock, hookimpl

            if os.environ.get("CC_SLOW_ASYNC"):
                @hookimpl
                async def pre_spawn_context(turn):
                    time.sleep(60)  # blocks the event loop: nothing can interrupt it
                    return ContextBlock(tag="slow-note", text="too late")
            else:
                @hookimpl
                def pre_spawn_context(turn):
                    time.sleep(60)  # a hook that waited for it would give its block
                    return ContextBlock(tag="slow-note", text="too late")
            """
        )
    )
    dist = site / "cc_test_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cc-test-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[thoth]\nquick = cc_quick_plugin\nslow = cc_slow_plugin\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    loaded = os.environ.get("THOTH_LOAD_PLUGINS")
    if loaded is not None:
        monkeypatch.setenv("THOTH_LOAD_PLUGINS", f"{loaded},quick,slow")
    return site
