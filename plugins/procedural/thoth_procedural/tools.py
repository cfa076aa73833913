"""The `load_skill` tool, offered through the core's `turn_tools` hook to providers that call tools."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .settings import Settings
from .skills import discover, load_skill
from .validate import SkillError

if TYPE_CHECKING:
    from thoth_core import Runtime


def load_skill_tool(runtime: Runtime) -> dict[str, Any]:
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


def run_load_skill(runtime: Runtime, tool_input: dict[str, Any]) -> str:
    """The tool result: the skill's whole SKILL.md, or a one-line error the model can read."""
    settings = Settings.of(runtime)
    try:
        return load_skill(settings.skills, str(tool_input.get("slug", "")), settings.limits).text
    except SkillError as exc:
        return f"error: {exc}"


__all__ = ["load_skill_tool", "run_load_skill"]
