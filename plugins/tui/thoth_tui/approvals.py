"""The approvals view: pending skill drafts and persona observations, decided from the keyboard."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.markup import escape
from textual import work
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Footer, Markdown, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from thoth_core import ThothError


def source_lines(source: Any) -> list[str]:
    """Where an item came from, as markup lines; existing paths become file links."""
    items = source.items() if isinstance(source, dict) else [("source", source)] if source else []
    lines = []
    for key, value in items:
        values = value if isinstance(value, list) else [value]
        shown = []
        for one in values:
            path = Path(str(one))
            if path.is_absolute() and path.exists():
                shown.append(f"[link={path.as_uri()}]{escape(str(one))}[/link]")
            else:
                shown.append(escape(str(one)))
        lines.append(f"{escape(str(key))}: {', '.join(shown)}")
    return lines


class EditScreen(ModalScreen[str | None]):
    """Edit an item's text; ctrl+s saves, escape cancels."""

    BINDINGS = [Binding("ctrl+s", "save", "Save"), Binding("escape", "cancel", "Cancel")]

    def __init__(self, item: dict[str, Any]) -> None:
        super().__init__()
        self.item = item

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(f"Editing {escape(self.item['id'])}  (ctrl+s save, escape cancel)", classes="title")
        yield TextArea(str(self.item.get("body", "")), id="edit-text")
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
        Binding("escape", "app.pop_screen", "Back"),
    ]

    def __init__(self, runtime: Any, actor: str) -> None:
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
        """Fetch the queue again and show it."""
        self.items = await self.runtime.approvals()
        options = self.query_one(OptionList)
        options.clear_options()
        for item in self.items:
            flagged = "[red]! [/]" if item.get("flags") else ""
            options.add_option(
                Option(flagged + escape(f"{item.get('kind', '?')}: {item.get('title', item['id'])}"), id=item["id"])
            )
        if self.items:
            options.highlighted = 0
            options.focus()
        await self.show(self.items[0] if self.items else None)

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
        lines = [
            f"[b]{escape(item['id'])}[/b]  {escape(str(item.get('kind', '')))}",
            escape(str(item.get("title", ""))),
        ]
        if item.get("flags"):
            lines.append(f"[red]flags: {escape(str(item['flags']))} - review before approving[/]")
        lines += source_lines(item.get("source"))
        if item.get("created_at"):
            lines.append(f"created {escape(str(item['created_at']))}")
        meta.update("\n".join(lines))
        await body.update(str(item.get("body", "")))

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
