"""The conversation: one widget per message, streamed Markdown replies, feedback keys."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.markdown import Markdown as RichMarkdown
from rich.text import Text
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Markdown, Static

from thoth_core.terminal import Printable, printable
from thoth_core.types import FEEDBACK_KINDS as REACTIONS  # feedback kind -> the Slack reaction it matches

if TYPE_CHECKING:
    from textual.widgets.markdown import MarkdownStream

LABELS = {"user": "you", "assistant": "thoth", "command": "command", "notice": "notice", "error": "error"}


class ChatMessage(Vertical, can_focus=True):
    """One message, shown without escape sequences; when selected, keys a/x/r/f/i react to it like Slack reactions."""

    BINDINGS = [
        Binding("a", "react('approve')", "Approve"),
        Binding("x", "react('reject')", "Reject"),
        Binding("r", "react('remember')", "Remember"),
        Binding("f", "react('forget')", "Forget"),
        Binding("i", "react('identity')", "Identity"),
        Binding("up", "move(-1)", "Previous", show=False),
        Binding("down", "move(1)", "Next", show=False),
        Binding("escape,enter", "back", "Back to input", show=False),
    ]

    class Reacted(Message):
        """A person pressed a feedback key on a message."""

        def __init__(self, message: ChatMessage, kind: str) -> None:
            super().__init__()
            self.message = message
            self.kind = kind

    def __init__(self, role: str, text: str = "", *, turn_id: str | None = None, item_id: str | None = None) -> None:
        super().__init__(classes=role)
        self.role = role
        self.text = printable(text)  # model and remembered text may hold terminal escapes (thoth_core.terminal)
        self.turn_id = turn_id
        self.item_id = item_id
        self.reactions: list[str] = []
        self._stream: MarkdownStream | None = None
        self._printable = Printable()  # a sequence split between streamed pieces is removed whole

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(self._label(), classes="label")
        if self.role == "assistant":
            yield Markdown(self.text, classes="body")
        else:
            yield Static(Text(self.text), classes="body")

    def _label(self) -> Text:
        label = Text(LABELS.get(self.role, self.role), style="bold")
        if self.item_id:
            label.append(f"  {self.item_id}", style="italic")
        for kind in self.reactions:
            label.append(f"  :{REACTIONS[kind]}:", style="dim")
        return label

    async def append(self, fragment: str) -> None:
        """Stream a piece of the reply into the Markdown body."""
        if self._stream is None:
            self.loading = False
            self.remove_class("pending")
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        fragment = self._printable.feed(fragment)
        self.text += fragment
        await self._stream.write(fragment)

    async def finish(self, turn_id: str | None) -> None:
        """The reply is complete: remember its turn, and swap the live Markdown for one static render.

        A Markdown widget is a tree of widgets (one per block and list item); a long chat of them
        makes every layout slower, so finished replies become a single Static of Rich Markdown.
        """
        self.turn_id = turn_id
        self.loading = False
        self.remove_class("pending")
        self.text += self._printable.end()
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        live = self.query_one(Markdown)
        await self.mount(Static(RichMarkdown(self.text), classes="body"), after=live)
        await live.remove()

    def add_reaction(self, kind: str) -> None:
        """Show that a reaction was applied."""
        self.reactions.append(kind)
        self.query_one(".label", Static).update(self._label())

    def action_react(self, kind: str) -> None:
        self.post_message(self.Reacted(self, kind))

    def action_move(self, step: int) -> None:
        siblings = list(self.parent.query_children(ChatMessage)) if self.parent else [self]
        index = siblings.index(self) + step
        if 0 <= index < len(siblings):
            siblings[index].focus()
            siblings[index].scroll_visible()
        elif step > 0:
            self.action_back()

    def action_back(self) -> None:
        self.app.query_one("#prompt").focus()
