"""Thoth L4 procedural memory: persona stack, skills (with an approval workflow), knowledge and reflexion notes."""

from __future__ import annotations

from . import drafts
from .persona import PERSONA_ORDER, PersonaError, load_persona
from .skills import discover, load_skill
from .tools import load_skill_tool, run_load_skill
from .validate import SkillError, check_slug, validate_skill

__all__ = [
    "PERSONA_ORDER",
    "PersonaError",
    "SkillError",
    "check_slug",
    "discover",
    "drafts",
    "load_persona",
    "load_skill",
    "load_skill_tool",
    "run_load_skill",
    "validate_skill",
]
