"""Checking a skill folder before anything reads or installs it.

Rules (agentskills.io, as the reference validator `skills-ref` applies them, plus this
project's own): the slug is 1-64 lowercase ASCII letters and digits in single-hyphen-separated
runs, equal to the folder name and to the frontmatter `name` (so no path traversal can hide in
it); SKILL.md starts with `---` YAML frontmatter holding only the spec's keys; `manifest.json`
(when present or required) agrees with the frontmatter; no symlink points out of the folder,
no file is larger than the limit, and the whole folder stays under its own limit. Every error is
one line naming the offending file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thoth_core import ThothError

from .frontmatter import yaml_data

SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
MAX_NAME = 64
MAX_DESCRIPTION = 1024
MAX_COMPATIBILITY = 500
FRONTMATTER_KEYS = {"name", "description", "license", "allowed-tools", "metadata", "compatibility"}
MANIFEST_KEYS = ("name", "version", "author", "license", "tools_allowed")


class SkillError(ThothError):
    """A skill or draft that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class Limits:
    """Size limits for one skill folder."""

    max_file_bytes: int = 256 * 1024
    max_skill_bytes: int = 1024 * 1024


@dataclass(frozen=True)
class SkillDoc:
    """A validated SKILL.md: its frontmatter, body and the whole text."""

    slug: str
    description: str
    frontmatter: dict[str, Any]
    body: str
    text: str
    manifest: dict[str, Any] | None = field(default=None)


def check_slug(slug: str) -> str:
    """The slug itself, or SkillError if it is not an agentskills.io name (this also stops traversal)."""
    if not isinstance(slug, str) or len(slug) > MAX_NAME or not SLUG.fullmatch(slug):
        raise SkillError(
            f"invalid skill name {slug!r}: use 1-{MAX_NAME} lowercase letters and digits separated by single hyphens, "
            "not starting or ending with one"
        )
    return slug


def parse_frontmatter(text: str, *, source: Path | str) -> tuple[dict[str, Any], str]:
    """(frontmatter, body) of a markdown file that starts with `---` YAML frontmatter."""
    if not text.startswith("---"):
        raise SkillError(f"{source}: malformed frontmatter: the file must start with '---'")
    parts = text.split("---", 2)
    if len(parts) < 3:
        raise SkillError(f"{source}: malformed frontmatter: no closing '---'")
    try:
        data = yaml_data(parts[1])
    except ValueError as exc:
        raise SkillError(f"{source}: malformed frontmatter: {exc}") from exc
    if not isinstance(data, dict):
        raise SkillError(f"{source}: malformed frontmatter: expected a mapping of keys, got {type(data).__name__}")
    return data, parts[2].strip()


def check_frontmatter(data: dict[str, Any], *, slug: str, source: Path | str) -> str:
    """Check SKILL.md's keys against the spec; returns the description."""
    unknown = sorted(set(data) - FRONTMATTER_KEYS)
    if unknown:
        raise SkillError(
            f"{source}: unknown frontmatter key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(FRONTMATTER_KEYS))}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SkillError(f"{source}: frontmatter needs a 'name'")
    try:
        check_slug(name.strip())
    except SkillError as exc:
        raise SkillError(f"{source}: {exc}") from None
    if name.strip() != slug:
        raise SkillError(f"{source}: name {name.strip()!r} must equal the folder name {slug!r}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillError(f"{source}: frontmatter needs a non-empty 'description'")
    if len(description) > MAX_DESCRIPTION:
        raise SkillError(f"{source}: description has {len(description)} characters; at most {MAX_DESCRIPTION}")
    compatibility = data.get("compatibility")
    if compatibility is not None and (not isinstance(compatibility, str) or len(compatibility) > MAX_COMPATIBILITY):
        raise SkillError(f"{source}: compatibility must be a string of at most {MAX_COMPATIBILITY} characters")
    metadata = data.get("metadata")
    if metadata is not None and (
        not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values())
    ):
        raise SkillError(f"{source}: metadata must map keys to strings")
    for key in ("license", "allowed-tools"):
        if key in data and not isinstance(data[key], str):
            raise SkillError(f"{source}: {key} must be a string")
    return " ".join(description.split())


def check_manifest(path: Path, frontmatter: dict[str, Any], *, slug: str) -> dict[str, Any]:
    """Read manifest.json and check it agrees with SKILL.md's frontmatter."""
    if not path.is_file():
        raise SkillError(f"{path}: missing")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SkillError(f"{path}: not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise SkillError(f"{path}: expected a JSON object")
    missing = [k for k in MANIFEST_KEYS if k not in data]
    if missing:
        raise SkillError(f"{path}: missing key(s) {', '.join(missing)}")
    for key in ("name", "version", "author", "license"):
        if not isinstance(data[key], str) or not data[key].strip():
            raise SkillError(f"{path}: {key} must be a non-empty string")
    if data["name"] != slug:
        raise SkillError(f"{path}: name {data['name']!r} must equal the skill name {slug!r}")
    tools = data["tools_allowed"]
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise SkillError(f"{path}: tools_allowed must be a list of tool names")
    if "license" in frontmatter and frontmatter["license"] != data["license"]:
        raise SkillError(f"{path}: license {data['license']!r} differs from SKILL.md's {frontmatter['license']!r}")
    if "allowed-tools" in frontmatter and frontmatter["allowed-tools"].split() != tools:
        raise SkillError(
            f"{path}: tools_allowed {tools} differs from SKILL.md's allowed-tools {frontmatter['allowed-tools']!r}"
        )
    return data


def check_tree(folder: Path, limits: Limits) -> None:
    """No symlink leaving the folder, no special files, no file or total over the limits."""
    root = folder.resolve()
    total = 0
    for current, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(current) / name
            shown = path.relative_to(folder)
            if path.is_symlink():
                target = path.resolve()
                if not target.is_relative_to(root):
                    raise SkillError(
                        f"{folder / shown}: symlink points outside the skill folder (to {os.readlink(path)})"
                    )
                if target.is_dir():
                    raise SkillError(f"{folder / shown}: symlinks to folders are not allowed")
            elif name in files and not path.is_file():
                raise SkillError(f"{folder / shown}: not a regular file")
            if name in files:
                size = path.stat().st_size
                if size > limits.max_file_bytes:
                    raise SkillError(f"{folder / shown}: file is {size} bytes; the limit is {limits.max_file_bytes}")
                total += size
    if total > limits.max_skill_bytes:
        raise SkillError(f"{folder}: skill is {total} bytes in all; the limit is {limits.max_skill_bytes}")


def validate_skill(
    folder: Path, *, slug: str | None = None, limits: Limits = Limits(), require_manifest: bool = False
) -> SkillDoc:
    """Check a whole skill folder (named slug, by default its own name); returns its parsed SKILL.md."""
    slug = check_slug(folder.name if slug is None else slug)
    if folder.is_symlink() or not folder.is_dir():
        raise SkillError(f"{folder}: not a skill folder")
    check_tree(folder, limits)
    skill_md = folder / "SKILL.md"
    if not skill_md.is_file():
        raise SkillError(f"{skill_md}: missing")
    try:
        text = skill_md.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"{skill_md}: cannot read: {exc}") from exc
    frontmatter, body = parse_frontmatter(text, source=skill_md)
    description = check_frontmatter(frontmatter, slug=slug, source=skill_md)
    manifest_path = folder / "manifest.json"
    manifest = None
    if manifest_path.exists() or require_manifest:
        manifest = check_manifest(manifest_path, frontmatter, slug=slug)
    return SkillDoc(slug, description, frontmatter, body, text, manifest)
