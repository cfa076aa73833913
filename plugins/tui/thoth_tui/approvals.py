"""The approvals view: the pending items this person may see (the approvals policy), decided from the keyboard.

A decider sees every item; anyone else sees the items about them and may only withdraw (reject) those:
a refused action shows the policy's one line in the status bar.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.style import Style
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Markdown, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from thoth_core import ThothError
from thoth_core.terminal import printable

if TYPE_CHECKING:
    from thoth_core import Runtime

SESSION_KEYS = ("session", "session_id")
MAX_IDS = 4


def transcript_of(home: Path, session_id: str) -> Path | None:
    """The working layer's transcript of a session, if it is on disk."""
    found = sorted((home / "working" / "transcripts").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def describe(item: dict[str, Any], home: Path) -> Text:
    """An item's id, title, flags and source; sessions link to their transcripts, paths to themselves."""
    text = Text()
    text.append(printable(str(item["id"])), style="bold")
    text.append(printable(f"  {item.get('kind', '')}\n{item.get('title', '')}\n"))
    if item.get("flags"):
        text.append(printable(f"flags: {item['flags']} - review before approving\n"), style="red")
    source = item.get("source")
    entries = source.items() if isinstance(source, dict) else [("source", source)] if source else []
    for key, value in entries:
        if value in (None, "", []):
            continue
        text.append(printable(f"{key}: "))
        if isinstance(value, list):
            more = f" (+{len(value) - MAX_IDS} more)" if len(value) > MAX_IDS else ""
            text.append(printable(", ".join(str(v) for v in value[:MAX_IDS]) + more + "\n"))
            continue
        text.append(printable(str(value)))
        link = transcript_of(home, str(value)) if key in SESSION_KEYS else Path(str(value))
        if link is not None and link.is_absolute() and link.exists():
            text.append("  ")
            label = "transcript" if key in SESSION_KEYS else "open"
            text.append(label, style=Style(link=link.as_uri(), underline=True))
        text.append("\n")
    if item.get("created_at"):
        text.append(f"created {item['created_at']}", style="dim")
    return text


class EditScreen(ModalScreen[str | None]):
    """Edit an item's text; ctrl+s saves, escape cancels."""

    BINDINGS = [Binding("ctrl+s", "save", "Save"), Binding("escape", "cancel", "Cancel")]

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__()
        self.item = item

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(f"Editing {escape(self.item['id'])}  (ctrl+s save, escape cancel)", classes="title")
        yield TextArea(printable(str(self.item.get("body", ""))), id="edit-text")
        yield Footer()

    def action_save(self) -> None:
        self.dismiss(self.query_one(TextArea).text)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ApprovalsScreen(Screen[None]):
    """Pending items on the left, the selected one on the right; a/e/x decide."""

    BINDINGS = [
        Binding("a", "decide('approve')", "Approve"),
        Binding("e", "edit", "Edit"),
        Binding("x", "decide('reject')", "Reject"),
        Binding("f5", "reload", "Reload"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, runtime: Runtime, actor: str) -> None:
        super().__init__()
        self.runtime = runtime
        self.actor = actor
        self.items: list[dict[str, Any]] = []

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("Approvals", classes="title")
        with Horizontal():
            yield OptionList(id="approval-list")
            with VerticalScroll(id="approval-detail"):
                yield Static(id="approval-meta")
                yield Markdown(id="approval-body")
        yield Static(id="approval-status")
        yield Footer()

    async def on_mount(self) -> None:
        await self.reload()

    async def reload(self) -> None:
        """Fetch the queue again (what this person may see) and show it."""
        self.items = await self.runtime.approvals(actor=self.actor)
        options = self.query_one(OptionList)
        options.clear_options()
        for item in self.items:
            flagged = "[red]! [/]" if item.get("flags") else ""
            options.add_option(
                Option(
                    flagged + escape(printable(f"{item.get('kind', '?')}: {item.get('title', item['id'])}")),
                    id=item["id"],
                )
            )
        if self.items:
            options.highlighted = 0
            options.focus()
        await self.show(self.items[0] if self.items else None)

    async def action_back(self) -> None:
        """Back to the chat, whose layers panel counts pending approvals."""
        self.app.pop_screen()
        await self.app.refresh_layers()  # type: ignore[attr-defined]

    async def action_reload(self) -> None:
        await self.reload()

    async def show(self, item: dict[str, Any] | None) -> None:
        """Show one item's details, flags and source."""
        meta = self.query_one("#approval-meta", Static)
        body = self.query_one("#approval-body", Markdown)
        if item is None:
            meta.update("Nothing is waiting for approval.")
            await body.update("")
            return
        meta.update(describe(item, self.runtime.home))
        await body.update(printable(str(item.get("body", ""))))

    async def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        await self.show(self.selected())

    def selected(self) -> dict[str, Any] | None:
        """The highlighted item."""
        index = self.query_one(OptionList).highlighted
        return self.items[index] if index is not None and index < len(self.items) else None

    async def action_decide(self, decision: str, text: str | None = None) -> None:
        """Approve, reject or edit the highlighted item and reload the queue."""
        item = self.selected()
        if item is None:
            return
        status = self.query_one("#approval-status", Static)
        try:
            outcome = await self.runtime.decide(
                item["id"], decision, actor=self.actor, reason=f"{decision} in the TUI", text=text
            )
            status.update(escape(str(outcome.get("message", f"{decision}: {item['id']}"))))
        except ThothError as exc:
            status.update(f"[red]{escape(str(exc))}[/]")
        await self.reload()

    @work
    async def action_edit(self) -> None:
        item = self.selected()
        if item is None:
            return
        text = await self.app.push_screen_wait(EditScreen(item))
        if text is not None:
            await self.action_decide("edit", text)
