"""The model's Markdown as Slack mrkdwn, escaped so a reply can never ping `@channel` or a person.

Slack reads `<...>` as mentions, links and broadcasts; the agent's text is escaped (`&`, `<`,
`>`) before bold, links and headings are rewritten, and code spans and fences are left as
they are. Long replies are split at line breaks to stay under Slack's message size.
"""

from __future__ import annotations

import re

LIMIT = 3900  # Slack advises at most 4,000 characters per message

_FENCE = re.compile(r"(```.*?```|`[^`\n]+`)", re.DOTALL)
_BOLD = re.compile(r"\*\*(.+?)\*\*|__(.+?)__")
_LINK = re.compile(r"\[([^\]\n]+)\]\((https?://[^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*$", re.MULTILINE)
_STRIKE = re.compile(r"~~(.+?)~~")


def escape(text: str) -> str:
    """Slack's three control characters, escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_mrkdwn(markdown: str) -> str:
    """Markdown from the model as escaped Slack mrkdwn."""
    parts = _FENCE.split(markdown)
    return "".join(escape(part) if index % 2 else _prose(escape(part)) for index, part in enumerate(parts))


def _prose(text: str) -> str:
    text = _HEADING.sub(r"*\1*", text)
    text = _BOLD.sub(lambda m: f"*{m.group(1) or m.group(2)}*", text)
    text = _STRIKE.sub(r"~\1~", text)
    return _LINK.sub(lambda m: f"<{m.group(2).replace('&amp;', '&')}|{m.group(1)}>", text)


def split(text: str, limit: int = LIMIT) -> list[str]:
    """The text in pieces of at most `limit` characters, cut at line breaks where possible."""
    pieces: list[str] = []
    while len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        cut = cut if cut > limit // 2 else limit
        pieces.append(text[:cut])
        text = text[cut:].lstrip("\n")
    return pieces + [text]
