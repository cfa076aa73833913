"""The write firewall: text that reads as instructions to the agent is flagged, never applied.

A reflection result is written from a transcript that anyone in the conversation could
have shaped. Text headed into persona files, skills or the identity layer is checked for
prompt-injection phrasing (in English, and a request to set rules or instructions aside in
any language the shared cues know), tool or shell commands and URLs to fetch; a memory note that
names a peer other than the session's own is held for review. A skill draft is also flagged
when it archives files, sends data off the machine, touches credentials or fetches things
(skills are never applied without approval; the flags tell the reviewer where to look). The text
checks are the shared write policy's (`thoth_core.write_policy.firewall`); `flags_for` returns the
contract's `flags` dict; consumers never auto-apply flagged text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from thoth_core.write_policy.firewall import (
    INJECTION,
    TOOL_COMMAND,
    URL,
    check_text,
    mentions,
    other_peers,
    skill_risks,
)

__all__ = [
    "INJECTION",
    "TOOL_COMMAND",
    "URL",
    "check_text",
    "flags_for",
    "mentions",
    "other_peers",
    "skill_risks",
]


def flags_for(result: dict[str, Any], *, peer: str, known_peers: Iterable[str]) -> dict[str, Any]:
    """The contract's `flags` for a validated result from a session of `peer`."""
    known = set(known_peers) | set(result.get("user_model_updates") or {})
    flags: dict[str, Any] = {}
    skill = result.get("skill")
    if skill:
        text = "\n".join(str(skill.get(part, "")) for part in ("name", "description", "body"))
        found = sorted({f for part in ("name", "description", "body") for f in check_text(str(skill.get(part, "")))})
        found += [flag for flag in skill_risks(text) if flag not in found]
        if found:
            flags["skill"] = found
    for field in ("memory_notes", "persona_observations"):
        per_item: dict[str, list[str]] = {}
        for index, text in enumerate(result.get(field) or []):
            found = check_text(text)
            if field == "memory_notes" and other_peers(text, own=peer, known=known):
                found.append("other-peer")
            if found:
                per_item[str(index)] = found
        if per_item:
            flags[field] = per_item
    updates: dict[str, dict[str, list[str]]] = {}
    for who, items in (result.get("user_model_updates") or {}).items():
        per_item = {}
        for index, text in enumerate(items):
            found = check_text(text) + (["other-peer"] if who.lower() != peer.lower() else [])
            if found:
                per_item[str(index)] = found
        if per_item:
            updates[who] = per_item
    if updates:
        flags["user_model_updates"] = updates
    return flags
