"""The command palette (ctrl+p): every key action and every slash command."""

from __future__ import annotations

from textual.command import DiscoveryHit, Hit, Hits, Provider


class ThothCommands(Provider):
    """Lists the app's actions and slash commands, as `ThothApp.palette_actions()` gives them."""

    async def discover(self) -> Hits:
        for title, help_text, callback in self.app.palette_actions():  # type: ignore[attr-defined]
            yield DiscoveryHit(title, callback, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for title, help_text, callback in self.app.palette_actions():  # type: ignore[attr-defined]
            score = matcher.match(f"{title} {help_text}")
            if score > 0:
                yield Hit(score, matcher.highlight(title), callback, text=title, help=help_text)
