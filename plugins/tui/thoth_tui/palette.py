"""The command palette (ctrl+p): every key action, every reaction and every slash command."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from .chat import REACTIONS

Action = tuple[str, str, Callable[[], Any]]  # (title, help, callback)


def palette_actions(app: Any) -> list[Action]:
    """The app's actions: its key bindings, the reactions, and each slash command."""
    actions: list[Action] = [
        ("New thread", "end this session and start a new thread (ctrl+n)", app.action_new_thread),
        ("Layers panel", "show or hide the five layers (F2)", app.action_toggle_layers),
        ("Approvals", "pending skill drafts and observations (F3)", app.action_approvals),
        ("Select last message", "then a/x/r/f/i react to it (ctrl+o)", app.action_select_last),
        ("Quit", "end the session and leave (ctrl+q)", app.action_quit),
    ]
    for kind, reaction in REACTIONS.items():
        actions.append(
            (f"React {kind}", f":{reaction}: on the selected message", partial(app.action_react_selected, kind))
        )
    for name, (usage, help_text) in sorted(app.command_table().items()):
        if usage:  # needs arguments: put it in the message box
            actions.append((f"/{name}", help_text, partial(app.fill_prompt, f"/{name} ")))
        else:
            actions.append((f"/{name}", help_text, partial(app.run_text, f"/{name}")))
    return actions


class ThothCommands(Provider):
    """Offers `palette_actions` of the app, fuzzy-matched on title and help."""

    async def discover(self) -> Hits:
        for title, help_text, callback in self.app.palette_actions():  # type: ignore[attr-defined]
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self.app.palette_actions():  # type: ignore[attr-defined]
            score = matcher.match(f"{title} {help_text}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, text=title, help=help_text)
