"""The approval workflow for skill drafts: write (from reflection), list, approve, reject, edit.

Drafts sit in `.claude/skill-drafts/<slug>/` (SKILL.md, manifest.json, src/, draft.json), a
folder skill discovery never reads. Every write is built in a hidden staging folder beside its
target, validated there, then renamed into place, so neither a draft nor a skill is ever
half-written. Approving copies the draft (without draft.json) into `.claude/skills/<slug>/`
and commits it with git when that folder is inside a repository; rejecting moves the draft to
`.claude/skill-drafts/.rejected/<slug>-<time>/` with the reason. Only `[thoth] founders` may
decide (anyone when the list is empty). Every action is appended to
`$THOTH_HOME/procedural/audit.jsonl`.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from thoth_core import ThothError
from thoth_core.git import git_commit

from .settings import Settings
from .validate import SkillError, check_slug, validate_skill

_audit_lock = threading.Lock()
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Draft:
    """A pending skill draft; `error` says why it cannot be approved as it is."""

    slug: str
    path: Path
    description: str = ""
    text: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    created_at: str = ""
    error: str | None = None

    @property
    def item_id(self) -> str:
        """The approval-queue id."""
        return f"skill:{self.slug}"

    def as_item(self) -> dict[str, Any]:
        """The draft as an item of `runtime.approvals()`."""
        title = f"skill {self.slug}: {self.description}" if self.description else f"skill {self.slug} (invalid)"
        flags = self.flags + (["invalid"] if self.error else [])
        body = self.text if not self.error else f"{self.error}\n\n{self.text}"
        return {
            "id": self.item_id,
            "kind": "skill",
            "title": title,
            "body": body,
            "source": self.source,
            "flags": flags,
            "created_at": self.created_at,
            "path": str(self.path),
        }


@dataclass(frozen=True)
class Decision:
    """What a decision did: where the skill went and the commit that recorded it."""

    item_id: str
    path: Path
    message: str
    commit: str | None = None


def render_skill_md(slug: str, description: str, body: str, *, license: str) -> str:
    """SKILL.md text: agentskills.io frontmatter (safely quoted), then the body."""
    import strictyaml  # imported here: it costs ~30 ms, too much for `thoth --help`

    front = strictyaml.as_document({"name": slug, "description": description, "license": license}).as_yaml()
    return f"---\n{front}---\n\n{body.strip()}\n"


def manifest_for(slug: str, settings: Settings, *, tools: list[str] | None = None) -> dict[str, Any]:
    """The manifest.json of a generated skill."""
    return {
        "name": slug,
        "version": "0.1.0",
        "author": settings.author,
        "license": settings.license,
        "tools_allowed": tools or [],
    }


@contextmanager
def _staging(parent: Path) -> Iterator[Path]:
    """A hidden scratch folder beside the target (same filesystem, so renames are atomic), removed after."""
    parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".staging-", dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _swap_in(staged: Path, target: Path) -> None:
    """Rename staged onto target; an existing target is moved into the staging folder first."""
    aside = staged.parent / ".previous"
    had_target = target.exists()
    if had_target:
        os.rename(target, aside)
    try:
        os.rename(staged, target)
    except OSError:
        if had_target:
            os.rename(aside, target)
        raise


def _write(settings: Settings, slug: str, *, description: str, body: str, meta: dict[str, Any]) -> Path:
    target = settings.drafts / slug
    with _staging(settings.drafts) as staging:
        staged = staging / slug
        (staged / "src").mkdir(parents=True)
        (staged / "src" / ".gitkeep").write_text("", encoding="utf-8")
        (staged / "SKILL.md").write_text(
            render_skill_md(slug, description, body, license=settings.license), encoding="utf-8"
        )
        (staged / "manifest.json").write_text(
            json.dumps(manifest_for(slug, settings), indent=2) + "\n", encoding="utf-8"
        )
        (staged / "draft.json").write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        validate_skill(staged, slug=slug, limits=settings.limits, require_manifest=True)
        _swap_in(staged, target)
    return target


def write_draft(
    runtime: Any, *, name: str, description: str, body: str, source: dict[str, Any] | None, flags: list[str] | None
) -> Path:
    """Write a pending skill draft (replacing an older draft of the same name); returns its folder."""
    settings = Settings.of(runtime)
    slug = check_slug(name)
    description = " ".join(str(description or "").split())
    if not description:
        raise SkillError(f"skill draft {slug!r} needs a description")
    if "---" in description:
        raise SkillError(f"skill draft {slug!r}: the description must not contain '---' (it would end the frontmatter)")
    if not str(body or "").strip():
        raise SkillError(f"skill draft {slug!r} needs a body")
    meta = {
        "slug": slug,
        "source": dict(source or {}),
        "flags": [str(f) for f in flags or []],
        "created_at": _now_iso(),
    }
    path = _write(settings, slug, description=description, body=str(body), meta=meta)
    audit(settings, "draft", slug, actor="reflection", source=meta["source"], flags=meta["flags"])
    return path


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / "draft.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SkillError(f"{folder / 'draft.json'}: cannot read: {exc}") from exc
    if not isinstance(meta, dict):
        raise SkillError(f"{folder / 'draft.json'}: expected a JSON object")
    return meta


def read_draft(settings: Settings, slug: str) -> Draft:
    """One pending draft, with `error` set if it is not valid as it is."""
    folder = _draft_folder(settings, slug)
    try:
        meta = _read_meta(folder)
        doc = validate_skill(folder, slug=slug, limits=settings.limits, require_manifest=True)
    except SkillError as exc:
        text = (
            (folder / "SKILL.md").read_text(encoding="utf-8", errors="replace")
            if (folder / "SKILL.md").is_file()
            else ""
        )
        return Draft(slug, folder, text=text, error=str(exc))
    return Draft(
        slug,
        folder,
        doc.description,
        doc.text,
        dict(meta.get("source") or {}),
        list(meta.get("flags") or []),
        str(meta.get("created_at", "")),
    )


def list_drafts(runtime: Any) -> list[Draft]:
    """Every pending draft, by slug (hidden staging and archive folders are not drafts)."""
    settings = Settings.of(runtime)
    if not settings.drafts.is_dir():
        return []
    names = sorted(p.name for p in settings.drafts.iterdir() if p.is_dir() and not p.name.startswith("."))
    drafts = []
    for name in names:
        try:
            drafts.append(read_draft(settings, name))
        except SkillError as exc:  # a folder whose name is not a valid slug
            drafts.append(Draft(name, settings.drafts / name, error=str(exc)))
    return drafts


def _draft_folder(settings: Settings, slug: str) -> Path:
    folder = settings.drafts / check_slug(slug)
    if not folder.is_dir() or folder.is_symlink():
        raise SkillError(f"no pending skill draft {slug!r} in {settings.drafts}")
    return folder


def check_founder(runtime: Any, actor: str, item_id: str) -> None:
    """Only `[thoth] founders` may decide; anyone may when the list is empty."""
    founders = [str(f) for f in runtime.config.get("thoth.founders") or []]
    if founders and actor not in founders:
        raise ThothError(f"{actor!r} may not decide {item_id}: only founders may ({', '.join(founders)})")


def approve_draft(runtime: Any, slug: str, *, actor: str) -> Decision:
    """Install a validated draft into the skills folder, commit it, audit it."""
    settings = Settings.of(runtime)
    check_founder(runtime, actor, f"skill:{check_slug(slug)}")
    draft = _draft_folder(settings, slug)
    validate_skill(draft, slug=slug, limits=settings.limits, require_manifest=True)
    target = settings.skills / slug
    replaced = target.exists()
    with _staging(settings.skills) as staging:
        staged = staging / slug
        shutil.copytree(draft, staged, symlinks=True, ignore=shutil.ignore_patterns("draft.json"))
        validate_skill(staged, slug=slug, limits=settings.limits, require_manifest=True)
        _swap_in(staged, target)
    shutil.rmtree(draft)
    commit = git_commit(target, f"Approve skill {slug} (by {actor})")
    audit(settings, "approve", slug, actor=actor, path=str(target), commit=commit, replaced=replaced)
    note = f"committed {commit[:10]}" if commit else "not committed (no git repository)"
    return Decision(f"skill:{slug}", target, f"approved skill {slug}: installed in {target}, {note}", commit)


def approve(runtime: Any, slug: str, *, actor: str) -> Path:
    """Approve a draft; returns the installed skill's folder."""
    return approve_draft(runtime, slug, actor=actor).path


def reject(runtime: Any, slug: str, *, actor: str, reason: str) -> Path:
    """Archive a draft with the reason; returns the archive folder."""
    settings = Settings.of(runtime)
    check_founder(runtime, actor, f"skill:{check_slug(slug)}")
    draft = _draft_folder(settings, slug)
    archive = settings.drafts / ".rejected" / f"{slug}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    os.rename(draft, archive)
    reason = reason.strip() or "(no reason given)"
    record = {"slug": slug, "actor": actor, "reason": reason, "rejected_at": _now_iso()}
    (archive / "rejection.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    audit(settings, "reject", slug, actor=actor, reason=reason, path=str(archive))
    return archive


def edit(runtime: Any, slug: str, *, actor: str, text: str) -> Path:
    """Replace a draft's instructions (the SKILL.md body) with text; it stays pending."""
    settings = Settings.of(runtime)
    check_founder(runtime, actor, f"skill:{check_slug(slug)}")
    current = read_draft(settings, slug)
    if current.error:
        raise SkillError(current.error)
    meta = _read_meta(current.path) | {"edited_by": actor, "edited_at": _now_iso()}
    path = _write(settings, slug, description=current.description, body=text, meta=meta)
    audit(settings, "edit", slug, actor=actor)
    return path


def audit(settings: Settings, action: str, slug: str, *, actor: str, **details: Any) -> None:
    """Append one decision to the audit log."""
    entry = {"at": time.time(), "action": action, "item_id": f"skill:{slug}", "slug": slug, "actor": actor, **details}
    settings.audit.parent.mkdir(parents=True, exist_ok=True)
    with _audit_lock, settings.audit.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


def read_audit(runtime: Any) -> list[dict[str, Any]]:
    """Every audit entry, oldest first."""
    path = Settings.of(runtime).audit
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def forget(runtime: Any, *, peer: str, workspace: str, thread: str | None) -> dict[str, int]:
    """Delete the drafts (pending and rejected) reflected from the peer's sessions and blank their
    audit entries. An installed skill drafted from them is the humans' file: each is logged
    (file and line) for a person to edit and counted, never edited here."""
    settings = Settings.of(runtime)

    def theirs(source: Any) -> bool:
        return (
            isinstance(source, dict)
            and (source.get("workspace"), source.get("peer")) == (workspace, peer)
            and thread in (None, source.get("thread"))
        )

    folders = [p for p in settings.drafts.glob("*") if p.is_dir() and not p.name.startswith(".")]
    folders += [p for p in (settings.drafts / ".rejected").glob("*") if p.is_dir()]
    deleted = 0
    for folder in folders:
        try:
            source = _read_meta(folder).get("source")
        except SkillError:
            continue
        if theirs(source) and not folder.is_symlink():
            shutil.rmtree(folder)
            deleted += 1
    with _audit_lock:
        entries = [json.loads(line) for line in _audit_lines(settings)]
        slugs = {e.get("slug") for e in entries if e.get("action") == "draft" and theirs(e.get("source"))}
        installed = {e.get("slug") for e in entries if e.get("action") == "approve" and e.get("slug") in slugs}
        kept = [
            {"at": e.get("at"), "action": e.get("action"), "forgotten": True} if e.get("slug") in slugs else e
            for e in entries
        ]
        blanked = sum(1 for e in entries if e.get("slug") in slugs)
        if blanked:
            staged = settings.audit.with_name(f".{settings.audit.name}.tmp")
            lines = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in kept)
            staged.write_text(lines, encoding="utf-8")
            os.replace(staged, settings.audit)
    to_edit = [settings.skills / str(slug) / "SKILL.md" for slug in sorted(installed)]
    to_edit = [path for path in to_edit if path.is_file()]
    for path in to_edit:
        lines = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
        logger.warning("%s:1-%d: approved skill drafted from forgotten peer %s; edit it by hand", path, lines, peer)
    return {"skill drafts": deleted, "audit entries blanked": blanked, "approved files to edit": len(to_edit)}


def _audit_lines(settings: Settings) -> list[str]:
    if not settings.audit.exists():
        return []
    return [line for line in settings.audit.read_text(encoding="utf-8").splitlines() if line.strip()]


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
