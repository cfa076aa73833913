"""Knowledge notes and reflexion records (the semantic and error-pattern tiers of seed 003).

`knowledge/<topic>.md` notes are loaded at session start as stable blocks. `reflexion/*.md`
records (YAML frontmatter, then `## Known Issue`, `## Root Cause`, `## Solution`,
`## Prevention`) are not loaded into context; they are looked up when a turn hits an error and
the best matches (by shared words with the error and the message) are offered for that turn.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from thoth_core import ContextBlock

from .validate import SkillError, parse_frontmatter

logger = logging.getLogger(__name__)

KNOWLEDGE_PRIORITY = 60
REFLEXION_PRIORITY = 85
SECTIONS = ("Known Issue", "Root Cause", "Solution", "Prevention")
STOPWORDS = frozenset(
    "the and for with that this from have has was were are not but you your into when then than what which while "
    "error failed failure turn could would should there their them they about after before again".split()
)
_WORD = re.compile(r"[a-z0-9]+")
_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}-?")


def words(text: str) -> set[str]:
    """The distinctive lowercase words of a text (3+ characters, no stopwords)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in STOPWORDS}


def read_notes(folder: Path) -> list[tuple[Path, str]]:
    """Every non-empty `<topic>.md` note (path, text), by topic name; unreadable ones are logged and skipped."""
    notes = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            text = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            logger.error("%s: cannot read knowledge note: %s", path, exc)
            continue
        if text:
            notes.append((path, text))
    return notes


def load_notes(folder: Path) -> list[ContextBlock]:
    """Every `<topic>.md` note as a stable `knowledge` block, by topic name; unreadable ones are logged and skipped."""
    return [
        ContextBlock(tag="knowledge", text=f"Topic: {path.stem}\n{text}", stable=True, priority=KNOWLEDGE_PRIORITY)
        for path, text in read_notes(folder)
    ]


@dataclass(frozen=True)
class Reflexion:
    """One error-pattern record."""

    path: Path
    meta: dict[str, object]
    sections: dict[str, str]

    @property
    def keywords(self) -> set[str]:
        """What an error must share with this record to match it: the known issue, task and tags."""
        tags = self.meta.get("tags", "")
        return words(
            " ".join(
                [
                    self.sections.get("Known Issue", ""),
                    str(self.meta.get("task", "")),
                    str(tags),
                    _DATE_PREFIX.sub("", self.path.stem),
                ]
            )
        )

    def render(self) -> str:
        """The record as offered to the model."""
        parts = [f"From {self.path.name}" + (f" ({self.meta['task']})" if self.meta.get("task") else "") + ":"]
        parts += [f"{name}: {self.sections[name]}" for name in SECTIONS if self.sections.get(name)]
        return "\n".join(parts)


def parse_reflexion(path: Path) -> Reflexion:
    """A reflexion record; SkillError (naming the file) when it is malformed."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{path}: cannot read reflexion record: {exc}") from exc
    meta, body = parse_frontmatter(text, source=path)
    sections: dict[str, str] = {}
    for match in re.finditer(r"^##\s+(.+?)\s*$\n(.*?)(?=^##\s|\Z)", body, re.MULTILINE | re.DOTALL):
        title = match.group(1).strip().title()
        if title in SECTIONS:
            sections[title] = " ".join(match.group(2).split())
    if not sections.get("Known Issue"):
        raise SkillError(f"{path}: a reflexion record needs a '## Known Issue' section")
    return Reflexion(path, meta, sections)


def load_reflexion(folder: Path) -> list[Reflexion]:
    """Every valid record under folder; malformed ones are logged and skipped."""
    records = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            records.append(parse_reflexion(path))
        except SkillError as exc:
            logger.error("reflexion record left out: %s", exc)
    return records


def matching(records: list[Reflexion], text: str, *, limit: int = 2) -> list[Reflexion]:
    """The records sharing the most words with text (at least two, or one for a one-word issue)."""
    wanted = words(text)
    scored = []
    for record in records:
        keywords = record.keywords
        shared = len(keywords & wanted)
        if shared >= min(2, len(keywords)) and shared:
            scored.append((-shared, record.path.name, record))
    return [record for _, _, record in sorted(scored, key=lambda s: s[:2])[:limit]]


def reflexion_block(records: list[Reflexion], error: str) -> ContextBlock | None:
    """The matching records as one block for the failing turn."""
    if not records:
        return None
    intro = f"The last attempt failed ({' '.join(error.split())[:200]}). Known issues like it and how they were solved:"
    return ContextBlock(
        tag="reflexion", text="\n\n".join([intro, *(r.render() for r in records)]), priority=REFLEXION_PRIORITY
    )
