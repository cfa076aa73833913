"""`[plugins.procedural]`: where the persona, skills, drafts, knowledge and reflexion notes live, and size limits.

Folders are relative to the project root (where thoth.toml is); the audit log is under `$THOTH_HOME`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .validate import Limits

if TYPE_CHECKING:
    from thoth_core import Runtime

NAME = "procedural"

FOLDERS = {
    "persona_dir": "persona",
    "skills_dir": ".claude/skills",
    "drafts_dir": ".claude/skill-drafts",
    "knowledge_dir": "knowledge",
    "reflexion_dir": "reflexion",
}
# Every key of the table (the core refuses others), with its default.
DEFAULTS: dict[str, Any] = {
    **FOLDERS,
    "max_file_kb": 256,
    "max_skill_kb": 1024,
    "license": "Apache-2.0",
    "author": "Thoth reflection",
}
MAX_KB = 1024 * 1024  # a GiB: a larger skill file is surely a mistake


@dataclass(frozen=True)
class Settings:
    """The procedural plugin's resolved settings."""

    persona: Path
    skills: Path
    drafts: Path
    knowledge: Path
    reflexion: Path
    audit: Path
    max_file_bytes: int = 256 * 1024
    max_skill_bytes: int = 1024 * 1024
    license: str = "Apache-2.0"
    author: str = "Thoth reflection"

    @property
    def limits(self) -> Limits:
        """The size limits of one skill folder."""
        return Limits(self.max_file_bytes, self.max_skill_bytes)

    @classmethod
    def of(cls, runtime: Runtime) -> Settings:
        """Settings from thoth.toml; a bad value is a one-line error naming its key."""
        table = {**DEFAULTS, **runtime.config.plugin(NAME)}

        def value(key: str, ok: Any, expected: str) -> Any:
            found = table[key]
            if isinstance(found, bool) or not ok(found):
                raise runtime.config.error(f"plugins.{NAME}.{key}", f"expected {expected}, got {found!r}")
            return found

        def folder(key: str) -> Path:
            return Path(runtime.config.root) / value(key, lambda v: isinstance(v, str) and v, "a folder path")

        def kilobytes(key: str) -> int:
            return runtime.config.integer(f"plugins.{NAME}.{key}", table[key], low=1, high=MAX_KB) * 1024

        def text(key: str) -> str:
            return str(value(key, lambda v: isinstance(v, str) and v.strip(), "a non-empty string")).strip()

        return cls(
            persona=folder("persona_dir"),
            skills=folder("skills_dir"),
            drafts=folder("drafts_dir"),
            knowledge=folder("knowledge_dir"),
            reflexion=folder("reflexion_dir"),
            audit=runtime.home / NAME / "audit.jsonl",
            max_file_bytes=kilobytes("max_file_kb"),
            max_skill_bytes=kilobytes("max_skill_kb"),
            license=text("license"),
            author=text("author"),
        )
