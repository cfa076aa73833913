"""`thoth claude-code install | uninstall | hook EVENT`: Claude Code's hooks, wired to this agent home.

A hook never blocks Claude Code: whatever goes wrong (bad stdin, a bad thoth.toml, a failing or
slow plugin) is one line on stderr and exit code 0 (exit 2 would block the prompt). Context hooks
answer within their budget: the work runs in a worker thread, every plugin's deadline is capped to
what is left, and at the budget what is ready is printed and the process leaves. SessionEnd hands
its work to a detached process, since Claude Code gives SessionEnd hooks about 1.5 s before it exits.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from thoth_core import ThothError
from thoth_core.cli import HelpGroup
from thoth_core.config import load_config
from thoth_core.home import default_home

from . import install as settings_file
from .settings import NAME, Settings
from .thin import process_started

logger = logging.getLogger(__name__)

CONTEXT_EVENTS = ("SessionStart", "UserPromptSubmit")
hard_exit: Callable[[int], Any] = os._exit  # leaves at the budget even when a plugin holds the event loop


@click.group(NAME, cls=HelpGroup)
def claude_code() -> None:
    """Give Claude Code this agent's memory: hooks in .claude/settings.json."""


@claude_code.command("install")
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The Claude Code project whose .claude/settings.json gets the hooks (default: here).",
)
@click.option("--user", "user_wide", is_flag=True, help="Install in ~/.claude/settings.json, for every project.")
def install_command(project: Path | None, user_wide: bool) -> None:
    """Add Thoth's SessionStart, UserPromptSubmit, Stop and SessionEnd hooks (again: replaces them)."""
    path = settings_path(project, user_wide)
    installed = settings_file.install(path, environment=hook_environment())
    click.echo(f"{path}: Thoth's Claude Code hooks written:")
    for event, command in installed.commands.items():
        click.echo(f"  {event}: {command}")
    click.echo(f"Undo with: thoth claude-code uninstall {'--user' if user_wide else f'--project {path.parent.parent}'}")


@claude_code.command("uninstall")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), default=None, help="Default: here.")
@click.option("--user", "user_wide", is_flag=True, help="Uninstall from ~/.claude/settings.json.")
def uninstall_command(project: Path | None, user_wide: bool) -> None:
    """Remove Thoth's hooks; the file's other settings and hooks stay as they are."""
    path = settings_path(project, user_wide)
    removed = settings_file.uninstall(path)
    click.echo(f"{path}: removed {removed} Thoth hook(s)" if removed else f"{path}: no Thoth hooks; nothing changed")


def settings_path(project: Path | None, user_wide: bool) -> Path:
    """The settings file install and uninstall work on."""
    if project is not None and user_wide:
        raise click.UsageError("use either --project DIR or --user, not both")
    if user_wide:
        return Path.home() / ".claude" / "settings.json"
    return (project or Path.cwd()).resolve() / ".claude" / "settings.json"


def hook_environment() -> dict[str, str]:
    """The variables that make a hook find this agent home from any directory Claude Code runs it in."""
    config = load_config()
    Settings.of(config)  # a bad [plugins.claude-code] is reported now, not at every prompt
    environment: dict[str, str] = {}
    if config.path is not None:
        environment["THOTH_CONFIG"] = str(config.path.resolve())
    if os.environ.get("THOTH_HOME"):
        environment["THOTH_HOME"] = str(Path(os.environ["THOTH_HOME"]).expanduser().resolve())
    elif config.path is None:
        environment["THOTH_HOME"] = str(default_home(config).resolve())
        click.echo(
            "thoth: no agent home here (no thoth.toml): Claude Code gets no persona, skills or notes. "
            "Run this inside an agent home (`thoth init DIR`) to connect it.",
            err=True,
        )
    return environment


@claude_code.command("hook")
@click.argument("event")
@click.option("--wait", is_flag=True, help="SessionEnd: do the work in this process (default: a detached one).")
def hook_command(event: str, wait: bool) -> None:
    """Run one Claude Code hook (SessionStart, UserPromptSubmit, Stop, SessionEnd) with its JSON on stdin."""
    started = process_started()  # the budget counts Python's start-up and plugin discovery too
    try:
        output = run_hook(event, sys.stdin.read(), wait=wait, started=started)
    except ThothError as exc:
        click.echo(f"thoth claude-code hook {event}: {exc}", err=True)
        return
    except Exception as exc:  # noqa: BLE001 - a hook must never fail Claude Code
        logger.debug("hook %s failed", event, exc_info=True)
        click.echo(f"thoth claude-code hook {event}: {type(exc).__name__}: {exc}", err=True)
        return
    if output is not None:
        done, text = output
        if text:
            click.echo(text)
        if not done:  # a plugin still holds the worker thread: leave now, the rest is abandoned
            sys.stdout.flush()
            sys.stderr.flush()
            hard_exit(0)


def run_hook(event: str, stdin: str, *, wait: bool, started: float) -> tuple[bool, str] | None:
    """Do one hook's work; for the context hooks (finished in time?, output)."""
    from .hooks import Payload, end_session, for_hooks, record_finished_turns

    if event not in settings_file.EVENTS:
        raise ThothError(f"unknown event {event!r}; Thoth handles {', '.join(settings_file.EVENTS)}")
    payload = Payload.parse(event, stdin)
    settings = Settings.of(load_config())
    if event in CONTEXT_EVENTS:
        budget = settings.budget if event == "UserPromptSubmit" else settings.start_budget
        return context_within(payload, settings, until=started + budget)
    if event == "SessionEnd" and not wait:
        detach(event, stdin)
        return None
    from thoth_core.cli import run, runtime

    work = record_finished_turns if event == "Stop" else end_session
    run(work(for_hooks(runtime(), settings), payload, settings))
    return None


def context_within(payload: Any, settings: Settings, *, until: float) -> tuple[bool, str]:
    """The context hook's output, computed in a worker thread and given up on at `until` (monotonic)."""
    from thoth_core.cli import runtime

    from .hooks import for_hooks, prompt_context, session_start_context

    make = prompt_context if payload.event == "UserPromptSubmit" else session_start_context
    ctx = click.get_current_context()
    ready = threading.Event()
    box: dict[str, Any] = {}

    async def work() -> None:
        try:
            with ctx.scope(cleanup=False):
                rt = runtime()
            for_hooks(rt, settings)
            try:
                box["text"] = await make(rt, payload, settings, until=until)
            finally:
                ready.set()
                await rt.aclose()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            box.setdefault("error", exc)
            ready.set()

    worker = threading.Thread(target=asyncio.run, args=(work(),), name="thoth-claude-code-hook", daemon=True)
    worker.start()
    ready.wait(max(0.0, until - time.monotonic()))
    if "error" in box:
        raise box["error"]
    text = str(box.get("text") or "")
    worker.join(max(0.0, until - time.monotonic()))
    if "text" not in box:
        logger.warning("claude-code: %s context not ready within its budget; none given", payload.event)
    return not worker.is_alive(), text


def detach(event: str, stdin: str) -> None:
    """Hand the hook to a detached `thoth claude-code hook EVENT --wait`, logging to HOME/claude-code/hooks.log."""
    log_path = default_home(load_config()) / NAME / "hooks.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    command = [*settings_file.thoth_executable(), NAME, "hook", event, "--wait"]
    with log_path.open("ab") as log:
        child = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=log, stderr=log, start_new_session=True, close_fds=True
        )
    assert child.stdin is not None
    child.stdin.write(stdin.encode("utf-8"))
    child.stdin.close()


__all__ = ["claude_code", "context_within", "hook_environment", "run_hook", "settings_path"]
