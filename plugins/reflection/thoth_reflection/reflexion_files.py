"""Reflexion record files (seed 003, tier 3): render, check, install and mark promoted.

A record is `reflexion/{date}-{slug}.md`: YAML frontmatter (date, agent, task, severity, tags),
then `## Known Issue`, `## Root Cause`, `## Solution`, `## Prevention`. The procedural layer reads
them back on a turn that hit an error. Reflection writes one only when a person approves a draft,
and marks one `promoted` when its guideline is approved into the persona rules.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from thoth_core import ThothError
from thoth_core.storage import write_atomic

SECTIONS = (
    ("known_issue", "Known Issue"),
    ("root_cause", "Root Cause"),
    ("solution", "Solution"),
    ("prevention", "Prevention"),
)
NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,150}$")
SECTION = re.compile(r"^##\s+(.+?)\s*$\n(.*?)(?=^##\s|\Z)", re.MULTILINE | re.DOTALL)
MAX_GUIDELINE = 400


def _plain(text: Any) -> str:
    """One line, no frontmatter fence, no leading heading marks (a record's value must not end its section)."""
    return " ".join(str(text).split()).replace("---", "-").lstrip("# ").strip()


def _front(meta: dict[str, Any]) -> str:
    import strictyaml  # imported here: it costs ~30 ms, too much for `thoth --help`

    return str(strictyaml.as_document({k: _plain(v) for k, v in meta.items() if _plain(v)}).as_yaml())


def render(record: dict[str, Any], *, day: str, agent: str) -> str:
    """A drafted record (a `ReflexionRecord` as a dict) as the markdown file text."""
    meta = {
        "date": day,
        "agent": agent,
        "task": record.get("task", ""),
        "severity": record.get("severity", ""),
        "tags": " ".join(record.get("tags") or []),
    }
    body = "\n\n".join(f"## {title}\n{_plain(record.get(key, ''))}" for key, title in SECTIONS)
    return f"---\n{_front(meta)}---\n\n{body}\n"


def file_name(day: str, slug: str) -> str:
    """The seed's file name: `{date}-{slug}.md`."""
    return f"{day}-{slug}.md"


def parse(text: str, *, source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(frontmatter, sections) of a record; ThothError naming source when it is malformed."""
    parts = text.split("---", 2)
    if not text.startswith("---") or len(parts) < 3:
        raise ThothError(f"{source}: a reflexion record starts with '---' YAML frontmatter closed by '---'")
    import strictyaml

    try:
        meta = strictyaml.load(parts[1]).data if parts[1].strip() else {}
    except strictyaml.YAMLError as exc:
        raise ThothError(f"{source}: malformed frontmatter: {' '.join(str(exc).split())}") from exc
    if not isinstance(meta, dict):
        raise ThothError(f"{source}: malformed frontmatter: expected keys and values")
    sections = {m.group(1).strip().title(): " ".join(m.group(2).split()) for m in SECTION.finditer(parts[2])}
    if not sections.get("Known Issue"):
        raise ThothError(f"{source}: a reflexion record needs a non-empty '## Known Issue' section")
    return meta, sections


def locate(folder: Path, record: str) -> Path | None:
    """The record file named `record` (with or without `.md`) in folder, or None."""
    name = record if record.endswith(".md") else f"{record}.md"
    if not NAME.match(name) or "/" in name:
        return None
    path = folder / name
    return path if path.is_file() and not path.is_symlink() else None


def install(folder: Path, name: str, text: str) -> Path:
    """Write an approved record as a new file (`-2`, `-3`, ... when another text has the name); returns its path."""
    if not NAME.match(name) or not name.endswith(".md"):
        raise ThothError(f"reflexion record name {name!r} is not a plain file name ending in .md")
    parse(text, source=name)
    stem = name.removesuffix(".md")
    path, n, body = folder / name, 1, text.rstrip("\n") + "\n"
    while path.exists():
        if path.read_text(encoding="utf-8") == body:  # written by an apply a killed worker began
            return path
        n += 1
        path = folder / f"{stem}-{n}.md"
    try:
        write_atomic(path, body)
    except OSError as exc:
        raise ThothError(f"{path}: cannot write the reflexion record: {exc}") from exc
    return path


def guideline_of(path: Path) -> str:
    """The guideline a record promotes to: when its known issue happens, its prevention (else solution)."""
    meta, sections = parse(path.read_text(encoding="utf-8"), source=str(path))
    issue = sections["Known Issue"].split(". ")[0].rstrip(".")
    advice = sections.get("Prevention") or sections.get("Solution") or ""
    if not advice:
        raise ThothError(f"{path}: the record has no Prevention or Solution to promote; pass --text")
    text = f"When {issue[:1].lower()}{issue[1:]}: {advice}"
    return text if len(text) <= MAX_GUIDELINE else text[: MAX_GUIDELINE - 3] + "..."


def mark_promoted(path: Path, *, day: str, to: str, actor: str) -> None:
    """Add `promoted`, `promoted_to` and `promoted_by` to a record's frontmatter (the body is kept)."""
    text = path.read_text(encoding="utf-8")
    meta, _ = parse(text, source=str(path))
    body = text.split("---", 2)[2]
    meta = {**meta, "promoted": day, "promoted_to": to, "promoted_by": actor}
    try:
        write_atomic(path, f"---\n{_front(meta)}---{body}")
    except OSError as exc:
        raise ThothError(f"{path}: cannot mark the record promoted: {exc}") from exc
