"""Claude Code's hook inputs and transcript lines, shaped as Claude Code writes them, for tests and the bench.

Where the shapes come from:
- Hook input, Claude Code hooks reference (https://code.claude.com/docs/en/hooks, "Common input
  fields" and each event's "input"): every event gets `session_id`, `transcript_path`, `cwd`,
  `permission_mode` and `hook_event_name`; UserPromptSubmit adds `prompt`; SessionStart `source`
  ("startup", "resume", "clear", "compact"); SessionEnd `reason` ("clear", "logout",
  "prompt_input_exit", "other"); Stop `stop_hook_active` ("true when Claude Code is already
  continuing as a result of a stop hook").
- Hook output (same page, "JSON output" / "Add context"): exit 0 with
  `{"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": "..."}}`;
  "exit code 2: blocking error" (for UserPromptSubmit it blocks and erases the prompt), so Thoth
  never exits 2.
- Transcript JSONL (`~/.claude/projects/<project>/<session-id>.jsonl`, as Claude Code writes it;
  the Agent SDK sessions page shows `{"type":"user","uuid":...,"message":{"content":...}}` and
  `{"type":"assistant","uuid":...,"parentUuid":...,"message":{"content":[{"type":"text",...}]}}`):
  lines with `type`, `uuid`, `parentUuid`, `sessionId`, `timestamp`, `isSidechain`, `cwd`,
  `version`, and `message` = `{"role", "content"}` where content is a string or a list of
  `text`, `thinking`, `tool_use` (`id`, `name`, `input`) and `tool_result` (`tool_use_id`,
  `content`) blocks; an assistant message's blocks may come one per line with the same
  `message.id`.
"""

from __future__ import annotations

import json
import uuid as uuids
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def hook_input(event: str, session_id: str, transcript: Path | str, *, cwd: Path | str = "/tmp", **fields: Any) -> str:
    """The JSON Claude Code writes to a command hook's stdin."""
    payload = {
        "session_id": session_id,
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }
    return json.dumps(payload)


@dataclass
class Transcript:
    """A Claude Code session transcript being written, one JSON line per message (or block)."""

    path: Path
    session_id: str
    cwd: str = "/tmp/project"
    last_uuid: str | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)
    clock: int = 0

    def _line(self, kind: str, message: dict[str, Any], **extra: Any) -> str:
        self.clock += 1
        line_uuid = str(uuids.uuid4())
        line = {
            "parentUuid": self.last_uuid,
            "isSidechain": False,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": "2.1.0",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": line_uuid,
            "timestamp": f"2026-03-01T10:{self.clock // 60:02d}:{self.clock % 60:02d}.000Z",
            **extra,
        }
        self.last_uuid = line_uuid
        self.lines.append(line)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
        return line_uuid

    def prompt(self, text: str) -> str:
        """The person types a prompt; returns its uuid."""
        return self._line("user", {"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, Any], stop_reason: str | None = "end_turn") -> str:
        """One assistant line holding these content blocks."""
        message = {
            "id": f"msg_{uuids.uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-6",
            "content": list(blocks),
            "stop_reason": stop_reason,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        }
        return self._line("assistant", message, requestId=f"req_{uuids.uuid4().hex[:12]}")

    def tool_round(self, name: str, tool_input: dict[str, Any], result: str) -> None:
        """The assistant calls a tool (thinking, then tool_use, one line each) and the tool answers."""
        tool_id = f"toolu_{uuids.uuid4().hex[:20]}"
        self.assistant({"type": "thinking", "thinking": "Let me look.", "signature": "sig"}, stop_reason=None)
        self.assistant({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}, stop_reason="tool_use")
        self._line(
            "user",
            {"role": "user", "content": [{"tool_use_id": tool_id, "type": "tool_result", "content": result}]},
            toolUseResult={"stdout": result, "stderr": "", "interrupted": False},
        )

    def reply(self, text: str) -> str:
        """The assistant's final text."""
        return self.assistant({"type": "text", "text": text})

    def turn(self, prompt: str, reply: str, *, tool: tuple[str, dict[str, Any], str] | None = None) -> str:
        """A whole turn: prompt, an optional tool round, the final reply; returns the prompt's uuid."""
        prompt_uuid = self.prompt(prompt)
        if tool is not None:
            self.tool_round(*tool)
        self.reply(reply)
        return prompt_uuid


__all__ = ["Transcript", "hook_input"]
