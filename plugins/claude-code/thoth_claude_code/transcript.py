"""Claude Code's session transcript (JSONL) read as finished turns: a person's prompt and the final reply.

Each line is one JSON object with `type`, `uuid`, `parentUuid`, `sessionId`, `timestamp` and, for
`user` and `assistant` lines, a `message` with `role` and `content`: a string, or a list of blocks
(`text`, `tool_use`, `tool_result`, `thinking`, `image`). A `user` line whose content holds
`tool_result` blocks is a tool's answer, not the person; an assistant message may be split over
several lines, one block each. A turn starts at a person's prompt; its reply is the assistant text
after the last tool result; it is finished once the last assistant line holds text and no
`tool_use`. Subagent lines (`isSidechain`), meta lines (`isMeta`, slash-command echoes) and
compaction summaries are not the person speaking and are skipped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

NOT_SPOKEN = ("<command-", "<local-command-", "[Request interrupted by user")


@dataclass(frozen=True)
class TranscriptTurn:
    """One finished turn of a Claude Code session."""

    uuid: str
    prompt: str
    reply: str
    at: float | None = None
    model: str = ""

    @property
    def turn_id(self) -> str:
        """Thoth's turn id: stable, from the prompt line's uuid."""
        return f"cc-{self.uuid}"


def read_entries(path: Path) -> list[dict[str, Any]]:
    """The transcript's JSON lines; a line being written (or broken) is skipped."""
    entries = []
    with path.open(encoding="utf-8", errors="replace") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                logger.info("%s:%d: not a JSON line; skipped", path, number)
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def blocks_of(message: Any) -> list[dict[str, Any]]:
    """A message's content as blocks (a plain string is one text block)."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content or [] if isinstance(b, dict)] if isinstance(content, list) else []


def text_of(blocks: list[dict[str, Any]]) -> str:
    """The text blocks joined."""
    return "\n\n".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text" and b.get("text")).strip()


def prompt_text(entry: dict[str, Any]) -> str | None:
    """The person's words if this line is a prompt, else None."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return None
    blocks = blocks_of(entry.get("message"))
    if any(b.get("type") == "tool_result" for b in blocks):
        return None
    text = text_of(blocks)
    return text if text and not text.startswith(NOT_SPOKEN) else None


def timestamp(entry: dict[str, Any]) -> float | None:
    """The line's ISO 8601 `timestamp` as unix seconds, if it has one."""
    try:
        return datetime.fromisoformat(str(entry["timestamp"])).timestamp()
    except (KeyError, ValueError):
        return None


@dataclass
class _Open:
    """A turn being read: its prompt line and the reply so far."""

    prompt: dict[str, Any]
    text: str
    reply: list[str]
    model: str = ""
    last_had_tool_use: bool = False

    def finished(self) -> TranscriptTurn | None:
        if not self.reply or self.last_had_tool_use:
            return None
        uuid = str(self.prompt.get("uuid") or "")
        if not uuid:
            return None
        return TranscriptTurn(uuid, self.text, "\n\n".join(self.reply), timestamp(self.prompt), self.model)


def finished_turns(entries: list[dict[str, Any]]) -> list[TranscriptTurn]:
    """The finished turns of a transcript, in order."""
    turns: list[TranscriptTurn] = []
    current: _Open | None = None
    for entry in entries:
        if entry.get("type") not in ("user", "assistant") or entry.get("isSidechain"):
            continue
        spoken = prompt_text(entry)
        if spoken is not None:
            done = current.finished() if current else None
            turns += [done] if done else []
            current = _Open(entry, spoken, [])
            continue
        if current is None:
            continue
        blocks = blocks_of(entry.get("message"))
        if entry.get("type") == "user":  # a tool's result: the reply is what comes after it
            current.reply, current.last_had_tool_use = [], False
            continue
        text = text_of(blocks)
        current.reply += [text] if text else []
        current.last_had_tool_use = any(b.get("type") == "tool_use" for b in blocks)
        current.model = str((entry.get("message") or {}).get("model") or current.model)
    done = current.finished() if current else None
    return turns + ([done] if done else [])


def read_turns(path: Path) -> list[TranscriptTurn]:
    """The finished turns of the transcript file at path."""
    return finished_turns(read_entries(path))


__all__ = ["TranscriptTurn", "finished_turns", "read_entries", "read_turns"]
