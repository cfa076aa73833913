"""The `load_skill` tool for providers that call tools: its definition and what running it returns.

The core does not yet let plugins add tools to `ModelRequest.tools` or run tool calls, so
nothing offers this to a model today; a core hook that collects tool definitions per turn
and a tool-use loop in the runtime would let the procedural plugin plug these two in as is.
"""

from __future__ import annotations

from typing import Any

from .settings import Settings
from .skills import discover, load_skill
from .validate import SkillError


def load_skill_tool(runtime: Any) -> dict[str, Any]:
    """The tool definition (Anthropic Messages `tools` shape), listing the installed slugs."""
    settings = Settings.of(runtime)
    slugs = [s.slug for s in discover(settings.skills, settings.limits).skills]
    return {
        "name": "load_skill",
        "description": "Load the full instructions of one skill of the skills index, by slug, before following it.",
        "input_schema": {
            "type": "object",
            "properties": {
                "slug": {"type": "string", "enum": slugs, "description": "The skill's slug from the index."}
            },
            "required": ["slug"],
        },
    }


def run_load_skill(runtime: Any, tool_input: dict[str, Any]) -> str:
    """The tool result: the skill's whole SKILL.md, or a one-line error the model can read."""
    settings = Settings.of(runtime)
    try:
        return load_skill(settings.skills, str(tool_input.get("slug", "")), settings.limits).text
    except SkillError as exc:
        return f"error: {exc}"


__all__ = ["load_skill_tool", "run_load_skill"]
