"""The message box: input history on up/down and slash-command completion on tab."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from rich.markup import escape
from textual.binding import Binding
from textual.suggester import Suggester
from textual.widgets import Input, Static

from thoth_core.redact import redact

HISTORY_LIMIT = 500


class SlashSuggester(Suggester):
    """Suggests the first slash command whose name starts with what was typed."""

    def __init__(self, names: Callable[[], list[str]]) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.names = names

    async def get_suggestion(self, value: str) -> str | None:
        matches = matching_commands(value, self.names())
        return f"/{matches[0]}" if matches else None


def matching_commands(value: str, names: list[str]) -> list[str]:
    """Command names completing a `/prefix` being typed (nothing once a space follows)."""
    if not value.startswith("/") or " " in value:
        return []
    prefix = value[1:]
    return sorted(name for name in names if name.startswith(prefix) and name != prefix)


def history_path(home: Path, peer: str) -> Path:
    """The peer's own input-history file under `$THOTH_HOME/tui/history/` (name quoted to be file-safe)."""
    return home / "tui" / "history" / f"{quote(peer, safe='') or '_'}.txt"


class History:
    """Sent messages, oldest first, kept in a file (secrets redacted by `keep`) so they survive restarts."""

    def __init__(self, path: Path | None, keep: Callable[[str], str] = redact) -> None:
        self.path = path
        self.keep = keep  # the runtime's `[privacy]` policy (`runtime.redactor.redact`); secrets only by default
        self.entries: list[str] = []
        if path is not None and path.exists():
            self.entries = [line for line in path.read_text(encoding="utf-8").splitlines() if line][-HISTORY_LIMIT:]
        self.position = len(self.entries)

    def add(self, text: str) -> None:
        """Remember a sent message (redacted) and reset browsing to the end."""
        text = self.keep(text)
        if "\n" not in text and (not self.entries or self.entries[-1] != text):
            self.entries.append(text)
            if self.path is not None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.write_text("\n".join(self.entries[-HISTORY_LIMIT:]) + "\n", encoding="utf-8")
        self.position = len(self.entries)

    def clear(self) -> int:
        """Forget every entry and delete the file; returns how many entries there were."""
        count = len(self.entries)
        self.entries, self.position = [], 0
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        return count

    def older(self) -> str | None:
        """The message before the one shown, or None at the start."""
        if self.position == 0:
            return None
        self.position -= 1
        return self.entries[self.position]

    def newer(self) -> str:
        """The message after the one shown, or empty past the end."""
        self.position = min(self.position + 1, len(self.entries))
        return self.entries[self.position] if self.position < len(self.entries) else ""


class Prompt(Input):
    """The message input: up/down browse history, tab completes a slash command."""

    BINDINGS = [
        Binding("up", "history_older", "Previous message", show=False),
        Binding("down", "history_newer", "Next message", show=False),
        Binding("tab", "complete", "Complete command", show=False),  # not priority: keys typed before it land first
    ]

    def __init__(self, history: History, names: Callable[[], list[str]], **kwargs: object) -> None:
        super().__init__(suggester=SlashSuggester(names), **kwargs)  # type: ignore[arg-type]
        self.history = history
        self.names = names

    def action_history_older(self) -> None:
        older = self.history.older()
        if older is not None:
            self.value = older
            self.cursor_position = len(older)

    def action_history_newer(self) -> None:
        self.value = self.history.newer()
        self.cursor_position = len(self.value)

    def action_complete(self) -> None:
        """Complete to the common prefix of the matching commands (the whole name if one)."""
        matches = matching_commands(self.value, self.names())
        if not matches:
            self.screen.focus_next()
            return
        common = matches[0]
        for name in matches[1:]:
            while not name.startswith(common):
                common = common[:-1]
        self.value = f"/{common}" + (" " if len(matches) == 1 else "")
        self.cursor_position = len(self.value)


class Completions(Static):
    """The slash commands matching what is being typed, with their help."""

    def show(self, value: str, commands: dict[str, tuple[str, str]]) -> None:
        """List matches of value among commands (name -> (usage, help)); hide when none."""
        matches = matching_commands(value, list(commands))
        self.display = bool(matches)
        lines = [
            escape(f"/{name} {commands[name][0]}".rstrip()) + f"  [dim]{escape(commands[name][1])}[/]"
            for name in matches[:6]
        ]
        if len(matches) > 6:
            lines.append(f"[dim]... {len(matches) - 6} more; tab completes[/]")
        self.update("\n".join(lines))
