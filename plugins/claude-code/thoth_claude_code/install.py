"""Thoth's entries in Claude Code's `settings.json`: added, replaced and removed without touching the rest.

The file's shape (Claude Code hooks reference, https://code.claude.com/docs/en/hooks):
`{"hooks": {"EventName": [{"matcher": "...", "hooks": [{"type": "command", "command": "...",
"timeout": SECONDS}]}]}}`. Events that take no matcher (UserPromptSubmit, Stop) leave it out.
An entry is Thoth's when its command runs `thoth claude-code hook EVENT`; a second install replaces
those entries (a moved virtualenv or agent home included) instead of adding more.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from thoth_core import ThothError

EVENTS = ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd")
MATCHERS = {"SessionStart": "startup|resume|clear|compact"}  # SessionEnd's matcher would filter reasons: all
# seconds Claude Code waits before it cancels the hook; Thoth's own budgets are tighter
TIMEOUTS = {"SessionStart": 30, "UserPromptSubmit": 15, "Stop": 60, "SessionEnd": 15}
OURS = re.compile(r"thoth(?:_core\.cli)?'?\s+claude-code\s+hook\s+(\w+)")


def thoth_executable() -> list[str]:
    """The absolute `thoth` command this process runs as, so Claude Code finds it from any directory."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "thoth":
        found = shutil.which(str(argv0))
        if found:
            return [str(Path(found).resolve())]
    beside = Path(sys.executable).with_name("thoth")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("thoth")
    if found:
        return [str(Path(found).resolve())]
    return [str(Path(sys.executable)), "-m", "thoth_core.cli"]


def hook_command(event: str, *, executable: list[str], environment: dict[str, str]) -> str:
    """The shell command Claude Code runs for an event; `|| true`: even a broken install never blocks it."""
    assignments = " ".join(f"{name}={shlex.quote(value)}" for name, value in environment.items())
    program = " ".join(shlex.quote(part) for part in executable)
    return f"{assignments + ' ' if assignments else ''}{program} claude-code hook {event} || true"


def is_ours(hook: Any) -> bool:
    """True for a hook entry that runs `thoth claude-code hook EVENT`."""
    return isinstance(hook, dict) and isinstance(hook.get("command"), str) and bool(OURS.search(hook["command"]))


def read_settings(path: Path) -> dict[str, Any]:
    """The settings file as a dict ({} when missing or empty); refuses a file that is not a JSON object."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ThothError(f"{path}: cannot read: {exc}") from exc
    if not text.strip():
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ThothError(
            f"{path}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}); nothing was changed, fix the file first"
        ) from exc
    if not isinstance(data, dict):
        raise ThothError(f"{path}: expected a JSON object, got {type(data).__name__}; nothing was changed")
    if not isinstance(data.get("hooks", {}), dict):
        raise ThothError(f"{path}: hooks: expected an object of events, got {data['hooks']!r}; nothing was changed")
    for event, groups in data.get("hooks", {}).items():
        if not isinstance(groups, list):
            raise ThothError(f"{path}: hooks.{event}: expected a list of matcher groups; nothing was changed")
    return data


def write_settings(path: Path, data: dict[str, Any]) -> None:
    """Write the file atomically (a temporary file renamed over it), keeping its permissions."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else None
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def without_ours(data: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """The settings with Thoth's hook entries removed (empty groups and events too), and how many went."""
    removed = 0
    hooks: dict[str, Any] = {}
    for event, groups in (data.get("hooks") or {}).items():
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if not isinstance(inner, list):
                kept_groups.append(group)
                continue
            kept = [hook for hook in inner if not is_ours(hook)]
            removed += len(inner) - len(kept)
            if kept or not inner:
                kept_groups.append({**group, "hooks": kept})
        if kept_groups:
            hooks[event] = kept_groups
    result = {k: v for k, v in data.items() if k != "hooks"}
    if hooks or ("hooks" in data and not removed):
        result["hooks"] = hooks
    return result, removed


def with_ours(data: dict[str, Any], commands: dict[str, str]) -> dict[str, Any]:
    """The settings with Thoth's entries for each event (any earlier ones replaced); the rest kept as it was."""
    result, _ = without_ours(data)
    hooks = dict(result.get("hooks") or {})
    for event, command in commands.items():
        group: dict[str, Any] = {"matcher": MATCHERS[event]} if event in MATCHERS else {}
        group["hooks"] = [{"type": "command", "command": command, "timeout": TIMEOUTS[event]}]
        hooks[event] = [*hooks.get(event, []), group]
    return {**result, "hooks": hooks}


@dataclass(frozen=True)
class Installed:
    """What `install` wrote: the file and each event's command."""

    path: Path
    commands: dict[str, str]


def install(path: Path, *, environment: dict[str, str], executable: list[str] | None = None) -> Installed:
    """Add (or replace) Thoth's hooks in the settings file at path."""
    data = read_settings(path)
    executable = executable or thoth_executable()
    commands = {event: hook_command(event, executable=executable, environment=environment) for event in EVENTS}
    write_settings(path, with_ours(data, commands))
    return Installed(path, commands)


def uninstall(path: Path) -> int:
    """Remove Thoth's hooks from the settings file at path; how many entries went (0: file left alone)."""
    if not path.exists():
        return 0
    data, removed = without_ours(read_settings(path))
    if removed:
        write_settings(path, data)
    return removed


__all__ = [
    "EVENTS",
    "Installed",
    "hook_command",
    "install",
    "is_ours",
    "read_settings",
    "thoth_executable",
    "uninstall",
]
