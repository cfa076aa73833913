"""The Thoth terminal app: chat with streaming replies, layers panel, approvals, commands.

All runtime calls run on the app's event loop: turns in a worker (so typing goes on while a
reply streams), everything else awaited from handlers. The `notify` hook reaches the running
app through `runtime.plugin_state("tui", ...)`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.app import App
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Footer, Header, Input, Static

from thoth_core import CheckIn, ModelError, ModelNotConfigured, ThothError
from thoth_core.redact import redactor_of
from thoth_core.terminal import printable
from thoth_core.types import new_id
from thoth_core.writes import unsaved_message

from .approvals import ApprovalsScreen
from .chat import REACTIONS, ChatMessage
from .layers import LayersPanel
from .palette import Action, ThothCommands, palette_actions
from .prompt import Completions, History, Prompt, history_path

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

TICK_SECONDS = 60.0
WIDE = 100  # the layers panel starts open at this width or more
DEFAULT_THREAD = "tui"  # when no thread is given and the peer has none yet
RECENT_TURNS = 10  # turns of a resumed session shown on start

WELCOME = "/help lists commands; F2 layers, F3 approvals, ctrl+o selects a message, ctrl+p every action."
FRONTEND_COMMANDS = {"new": ("", "start a new thread (TUI; also ctrl+n)")}


class Attached:
    """The app currently running on a runtime, for the notify hook."""

    app: ThothApp | None = None


def banner_text(exc: Exception) -> str:
    """What the banner says about a model problem, with how to fix it."""
    if isinstance(exc, ModelNotConfigured):
        return f"Model missing: {exc}"
    if isinstance(exc, ModelError):
        return (
            f"Model failed: {exc}\nFix: start the model server or check ANTHROPIC_BASE_URL and [models] in thoth.toml; "
            "`thoth doctor` checks it. Slash commands still work."
        )
    return f"Model problem: {type(exc).__name__}: {exc}" if not isinstance(exc, ThothError) else f"Model problem: {exc}"


def unsaved_text(payload: Mapping[str, Any], *, current_thread: str) -> str:
    """What the person is told when layers could not save a replied turn (`turn_unsaved`)."""
    where = "" if payload.get("thread") in (None, current_thread) else f" (thread {payload['thread']})"
    return unsaved_message(payload.get("failed") or {}, where=where)


class ThothApp(App[None]):
    """Chat with Thoth; F2 layers, F3 approvals, ctrl+n new thread, ctrl+p every action."""

    CSS_PATH = "tui.tcss"
    TITLE = "Thoth"
    COMMANDS = App.COMMANDS | {ThothCommands}
    BINDINGS = [
        Binding("ctrl+n", "new_thread", "New thread"),
        Binding("f2", "toggle_layers", "Layers"),
        Binding("f3", "approvals", "Approvals"),
        Binding("ctrl+o", "select_last", "Select message"),
        Binding("ctrl+q", "quit", "Quit", priority=True),
    ]

    def __init__(self, runtime: Runtime, *, peer: str, thread: str | None = None) -> None:
        super().__init__()
        self.runtime = runtime
        self.peer = peer
        self.thread = thread or ""  # empty: reopen the peer's last active thread on mount
        self.session: Any = None
        self.busy = False
        self.model_lock = asyncio.Lock()
        self.selected: ChatMessage | None = None
        self.history = History(history_path(runtime.home, peer), redactor_of(runtime).redact)

    # --- layout and start -------------------------------------------------------------

    def compose(self):  # type: ignore[no-untyped-def]
        yield Header()
        yield Static(id="banner")
        with Horizontal(id="main"):
            yield VerticalScroll(id="chat")
            yield LayersPanel(id="layers")
        yield Completions(id="completions")
        yield Prompt(
            self.history, lambda: list(self.command_table()), placeholder="Message Thoth, or /help", id="prompt"
        )
        yield Footer()

    @property
    def chat(self) -> VerticalScroll:
        """The conversation (on the main screen, whichever screen is on top)."""
        return self.screen_stack[0].query_one("#chat", VerticalScroll)

    @property
    def panel(self) -> LayersPanel:
        """The layers panel (on the main screen)."""
        return self.screen_stack[0].query_one(LayersPanel)

    async def on_mount(self) -> None:
        self.runtime.plugin_state("tui", Attached).app = self
        self.thread = self.thread or await self.runtime.last_thread(peer=self.peer) or DEFAULT_THREAD
        self.session = await self.runtime.session(peer=self.peer, thread=self.thread)
        self.update_title()
        self.check_model()
        self.panel.set_class(self.size.width >= WIDE, "shown")
        self.chat.anchor()
        await self.add(ChatMessage("notice", f"Thread {self.thread}. {WELCOME}"))
        await self.show_recent()
        await self.refresh_layers()
        self.set_interval(TICK_SECONDS, self.tick)
        self.query_one(Prompt).focus()

    async def show_recent(self) -> None:
        """The last turns of a resumed session, so a restart shows where the conversation was."""
        turns = [e for e in self.session.transcript if e.get("type") == "turn"][-RECENT_TURNS:]
        for entry in turns:
            turn_id = entry.get("turn_id")
            await self.add(ChatMessage("user", str(entry.get("user", "")), turn_id=turn_id))
            reply = await self.add(ChatMessage("assistant", str(entry.get("assistant", ""))))
            await reply.finish(turn_id)

    def update_title(self) -> None:
        """Header: who, which thread, which model."""
        self.sub_title = f"{self.peer} · thread {self.thread} · model {self.runtime.model_name() or 'none'}"

    def command_table(self) -> dict[str, tuple[str, str]]:
        """Every slash command: name -> (usage, help), the runtime's and the TUI's own."""
        table = {name: (c.usage, c.help) for name, c in self.runtime.commands.items()}
        return {**table, **FRONTEND_COMMANDS}

    @work(group="model", exit_on_error=False)
    async def check_model(self) -> None:
        """Build the model provider off the event loop; a banner says what is wrong with it."""
        try:
            await self.ensure_model()
        except Exception as exc:  # noqa: BLE001 - a provider that cannot be built is shown, not fatal
            self.show_banner(exc)

    async def ensure_model(self) -> None:
        """The provider, built once in a thread (importing an SDK can take seconds)."""
        async with self.model_lock:
            await asyncio.to_thread(self.runtime.model)

    # --- chat -------------------------------------------------------------------------

    async def add(self, message: ChatMessage) -> ChatMessage:
        """Append a message to the conversation."""
        await self.chat.mount(message)
        return message

    def show_banner(self, exc: Exception) -> None:
        banner = self.screen_stack[0].query_one("#banner", Static)
        banner.update(printable(banner_text(exc)))
        banner.add_class("shown")

    def hide_banner(self) -> None:
        self.screen_stack[0].query_one("#banner").remove_class("shown")

    @on(Input.Changed, "#prompt")
    def complete(self, event: Input.Changed) -> None:
        self.query_one(Completions).show(event.value, self.command_table())

    @on(Input.Submitted, "#prompt")
    async def submit(self, event: Input.Submitted) -> None:
        if await self.run_text(event.value):
            event.input.value = ""

    async def run_text(self, text: str) -> bool:
        """Send a message or slash command; False when nothing was sent (empty, or still busy)."""
        text = text.strip()
        if not text:
            return False
        if self.busy:
            self.notify("Still answering the last message.", severity="warning")
            return False
        self.history.add(text)
        if text.split()[0] == "/new":
            await self.action_new_thread()
            return True
        self.busy = True
        self.send(text)
        return True

    @work(group="turn", exit_on_error=False)
    async def send(self, text: str) -> None:
        """Run one turn (or slash command) and show the reply as it streams."""
        try:
            user = await self.add(ChatMessage("user", text))
            name = text[1:].partition(" ")[0] if text.startswith("/") else None
            if name is not None:
                await self.run_command(name, text)
            else:
                await self.ask(user, text)
            await self.refresh_layers()
        except Exception as exc:  # a bug in one turn must not end the chat
            logger.exception("turn failed")
            await self.add(ChatMessage("error", f"{type(exc).__name__}: {exc}"))
        finally:
            self.busy = False

    async def run_command(self, name: str, text: str) -> None:
        if name not in self.runtime.commands:
            await self.add(ChatMessage("error", f"unknown command /{name}; /help lists them"))
            return
        result = await self.runtime.turn(text, peer=self.peer, thread=self.thread)
        output = result.reply.text
        if name == "help":
            output += "".join(
                f"\n/{n} - {h}" for n, (_, h) in FRONTEND_COMMANDS.items() if n not in self.runtime.commands
            )
        self.session = result.session
        if name == "done":
            await self.new_thread()  # the ended session's conversation is over
        await self.add(ChatMessage("command", output))

    async def ask(self, user: ChatMessage, text: str) -> None:
        reply = ChatMessage("assistant")
        reply.add_class("pending")
        await self.add(reply)
        reply.loading = True
        try:
            await self.ensure_model()
            result = await self.runtime.turn(text, peer=self.peer, thread=self.thread, on_delta=reply.append)
        except ThothError as exc:
            await reply.remove()
            await self.add(ChatMessage("error", str(exc)))
            self.show_banner(exc)
            return
        user.turn_id = result.turn.id
        await reply.finish(user.turn_id)
        self.session = result.session
        self.hide_banner()

    async def new_thread(self) -> None:
        """Start a fresh thread (and session) with an empty conversation."""
        self.thread = f"tui-{new_id()[:8]}"
        await self.chat.remove_children()
        self.session = await self.runtime.session(peer=self.peer, thread=self.thread)
        self.update_title()
        await self.add(ChatMessage("notice", f"New thread {self.thread}."))

    # --- feedback and notifications ---------------------------------------------------

    def on_descendant_focus(self, event: Any) -> None:
        if isinstance(event.widget, ChatMessage):
            self.selected = event.widget

    async def on_chat_message_reacted(self, event: ChatMessage.Reacted) -> None:
        await self.react(event.message, event.kind)

    async def react(self, message: ChatMessage, kind: str) -> None:
        """Apply a feedback key: approve/reject an item by id, else the layers' feedback hook."""
        try:
            if kind in ("approve", "reject") and message.item_id:
                outcome = await self.runtime.decide(message.item_id, kind, actor=self.peer, reason=f"{kind} in the TUI")
                said = [str(outcome.get("message", f"{kind}: {message.item_id}"))]
            else:
                session = await self.runtime.session(peer=self.peer, thread=self.thread)
                results = await self.runtime.feedback(
                    kind, turn_id=message.turn_id or "", text=message.text, actor=self.peer, session=session
                )
                said = [str(r.get("message", r)) for r in results]
        except ThothError as exc:
            await self.add(ChatMessage("error", str(exc)))
            return
        message.add_reaction(kind)
        await self.add(
            ChatMessage("notice", f":{REACTIONS[kind]}: " + ("; ".join(said) or f"no layer acted on {kind}"))
        )
        await self.refresh_layers()

    async def show_notice(self, event: str, payload: Mapping[str, Any]) -> None:
        """Show something a plugin told people (`notify` hook)."""
        if event == "turn_unsaved":
            await self.show_unsaved(payload)
            return
        text = printable(str(payload.get("text", "")))
        await self.add(ChatMessage("notice", f"{event}: {text}", item_id=payload.get("item_id")))
        self.notify(text or event, title=event, markup=False)
        await self.refresh_layers()

    async def show_unsaved(self, payload: Mapping[str, Any]) -> None:
        """Warn that a layer could not save one of this person's turns (it stays in the journal)."""
        if payload.get("peer") != self.peer:
            return  # another frontend's turn, replayed from the shared journal
        text = printable(unsaved_text(payload, current_thread=self.thread))
        await self.add(ChatMessage("notice", text))
        self.notify(text, title="Not saved yet", severity="warning", timeout=15, markup=False)

    async def tick(self) -> None:
        """Every minute: end idle sessions and deliver due check-ins."""
        await self.runtime.reap_idle()
        for check_in in await self.runtime.due_check_ins(accept=self.accepts_check_in):
            await self.show_notice("check_in", check_in)

    def accepts_check_in(self, item: CheckIn) -> bool:
        """Only this person's check-ins, in this workspace, are shown here."""
        workspace = self.session.workspace if self.session is not None else self.runtime.config.get("thoth.workspace")
        return item.get("peer") == self.peer and item.get("workspace", workspace) == workspace

    # --- actions ----------------------------------------------------------------------

    async def refresh_layers(self) -> None:
        if self.panel.has_class("shown"):
            await self.panel.refresh_from(self.runtime, peer=self.peer, workspace=self.session.workspace)

    async def action_toggle_layers(self) -> None:
        self.panel.toggle_class("shown")
        await self.refresh_layers()

    def action_approvals(self) -> None:
        self.push_screen(ApprovalsScreen(self.runtime, actor=self.peer))

    async def action_new_thread(self) -> None:
        if self.session is not None and not self.session.ended:
            await self.runtime.end_session(self.session, "new")
        await self.new_thread()

    def action_select_last(self) -> None:
        messages = list(self.chat.query(ChatMessage))
        if messages:
            messages[-1].focus()
            messages[-1].scroll_visible()

    async def action_react_selected(self, kind: str) -> None:
        if self.selected is not None and self.selected.is_attached:
            await self.react(self.selected, kind)
        else:
            self.notify("Select a message first (ctrl+o, then up/down).", severity="warning")

    def fill_prompt(self, text: str) -> None:
        prompt = self.screen_stack[0].query_one(Prompt)
        prompt.value = text
        prompt.cursor_position = len(text)
        prompt.focus()

    def get_system_commands(self, screen: Any) -> Any:
        """Textual's own palette commands, less its Quit (ours says it ends the session)."""
        return (command for command in super().get_system_commands(screen) if command.title != "Quit")

    def palette_actions(self) -> list[Action]:
        """Every action for the command palette: (title, help, callback)."""
        return palette_actions(self)

    async def action_quit(self) -> None:
        """End the session, let background writes finish, close plugin state, leave."""
        self.notify("Ending the session; finishing background work...", timeout=30)
        if self.session is not None and not self.session.ended:
            await self.runtime.end_session(self.session, "exit")
        await self.runtime.aclose()
        self.runtime.plugin_state("tui", Attached).app = None
        self.exit()
