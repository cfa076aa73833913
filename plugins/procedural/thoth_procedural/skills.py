"""Installed skills: discovery in `.claude/skills/<slug>/`, the index block and on-demand loading.

The context always gets the index (slug + one-line description, stable); a skill's whole
SKILL.md is loaded only for the turn it is invoked. Folders whose name starts with a dot
(staging areas) are not skills; invalid skills are left out of the index with a logged error.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from thoth_core import ContextBlock

from .validate import Limits, SkillDoc, SkillError, check_slug, validate_skill

logger = logging.getLogger(__name__)

INDEX_PRIORITY = 70
SKILL_PRIORITY = 90


@dataclass(frozen=True)
class Catalog:
    """The valid skills of a folder, and one error line per invalid one."""

    skills: list[SkillDoc]
    errors: list[str]

    def index_block(self) -> ContextBlock | None:
        """The stable index block: one line per skill."""
        if not self.skills:
            return None
        lines = [f"- {s.slug}: {s.description}" for s in self.skills]
        text = (
            "Skills you can use; the full instructions of one load when it is invoked (`/skill SLUG`):\n"
            + "\n".join(lines)
        )
        return ContextBlock(tag="skills", text=text, stable=True, priority=INDEX_PRIORITY)


def discover(folder: Path, limits: Limits = Limits()) -> Catalog:
    """Every skill folder under folder, validated."""
    skills: list[SkillDoc] = []
    errors: list[str] = []
    if not folder.is_dir():
        return Catalog(skills, errors)
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not (path.is_dir() or path.is_symlink()):
            continue
        try:
            skills.append(validate_skill(path, limits=limits))
        except SkillError as exc:
            logger.error("skill left out: %s", exc)
            errors.append(str(exc))
    return Catalog(skills, errors)


def load_skill(folder: Path, slug: str, limits: Limits = Limits()) -> SkillDoc:
    """One installed skill, validated; SkillError if the slug is bad or unknown."""
    check_slug(slug)
    path = folder / slug
    if not path.exists():
        raise SkillError(f"no skill {slug!r} in {folder}")
    return validate_skill(path, limits=limits)


def skill_block(skill: SkillDoc) -> ContextBlock:
    """A skill's whole SKILL.md, for the turn it was invoked in."""
    return ContextBlock(
        tag="skill",
        text=f"The person invoked the skill {skill.slug}. Follow it:\n\n{skill.text.strip()}",
        priority=SKILL_PRIORITY,
    )
