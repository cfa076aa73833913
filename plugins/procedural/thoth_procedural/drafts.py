"""The approval workflow for skill drafts: write (from reflection), list, approve, reject, edit.

Drafts sit in `.claude/skill-drafts/<key>/` (SKILL.md, manifest.json, src/, draft.json), a
folder skill discovery never reads. The key is the slug plus a hash of whose session proposed
it, `<slug>--<8 hex>` (just `<slug>` for a draft from no one's session), so two peers proposing
the same skill get two drafts, and forgetting one never touches the other's draft or audit
entries. The approval item is `skill:<key>`. Every write is built in a hidden staging folder
beside its target, validated there, then renamed into place, so neither a draft nor a skill is
ever half-written. Approving copies the draft (without draft.json) into `.claude/skills/<slug>/`
(replacing an installed skill of that name) and commits it with git when that folder is inside a
repository; rejecting moves the draft to `.claude/skill-drafts/.rejected/<key>-<time>/` with the
reason. Who may decide is the runtime's approvals policy (`thoth_core.approvals`); these
functions keep the files. Every action is appended to `$THOTH_HOME/procedural/audit.jsonl`.

With `[storage] url` set, drafts, approved skills and the audit log live in the shared store
instead (`thoth_procedural.shared`), so every host lists and decides the same drafts; these
functions keep their signatures and leave the folders alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core.git import git_commit

from .folders import Files, folder_files, staging, swap_in, write_files
from .settings import Settings
from .shared import LocalDraft, SharedDrafts, shared_drafts, validate_files
from .validate import SkillError, check_slug, validate_skill

if TYPE_CHECKING:
    from thoth_core import Runtime

_audit_lock = threading.Lock()
logger = logging.getLogger(__name__)
OWNER_HASH = re.compile(r"[0-9a-f]{8}")


def draft_key(slug: str, source: dict[str, Any] | None) -> str:
    """The folder (and item id) of a draft: `<slug>--<hash of workspace and peer>`, or the slug when no one's."""
    source = source or {}
    if not source.get("peer"):
        return slug
    owner = f"{source.get('workspace') or ''}\0{source['peer']}"
    return f"{slug}--{hashlib.sha256(owner.encode()).hexdigest()[:8]}"


def slug_of(key: str) -> str:
    """The skill slug a draft key names, or SkillError when it is neither a slug nor `<slug>--<8 hex>`."""
    slug, sep, owner = key.rpartition("--") if isinstance(key, str) and "--" in key else (key, "", "")
    if sep and not OWNER_HASH.fullmatch(owner):
        raise SkillError(f"invalid skill draft key {key!r}: expected SLUG or SLUG--<8 hex digits>")
    return check_slug(slug)


@dataclass(frozen=True)
class Draft:
    """A pending skill draft (in folder `key`); `error` says why it cannot be approved as it is."""

    key: str
    path: Path
    description: str = ""
    text: str = ""
    source: dict[str, Any] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    created_at: str = ""
    error: str | None = None
    where: str = ""  # where it is kept, when not in its folder (the shared store)

    @property
    def slug(self) -> str:
        """The skill's name, as it is installed."""
        return self.key.rpartition("--")[0] if "--" in self.key else self.key

    @property
    def item_id(self) -> str:
        """The approval-queue id."""
        return f"skill:{self.key}"

    def as_item(self) -> dict[str, Any]:
        """The draft as an item of the `approvals` hook, naming the peer whose session proposed it."""
        title = f"skill {self.slug}: {self.description}" if self.description else f"skill {self.slug} (invalid)"
        if self.source.get("peer"):
            title += f" (from {self.source['peer']})"
        flags = self.flags + (["invalid"] if self.error else [])
        body = self.text if not self.error else f"{self.error}\n\n{self.text}"
        return {
            "id": self.item_id,
            "kind": "skill",
            "title": title,
            "body": body,
            "workspace": self.source.get("workspace") if self.source.get("peer") else None,
            "peer": self.source.get("peer") or None,
            "source": self.source,
            "flags": flags,
            "created_at": self.created_at,
            "path": self.where or str(self.path),
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


def skill_files(settings: Settings, slug: str, *, description: str, body: str) -> Files:
    """The files of a generated skill: SKILL.md, manifest.json and an empty src/."""
    return {
        "SKILL.md": render_skill_md(slug, description, body, license=settings.license),
        "manifest.json": json.dumps(manifest_for(slug, settings), indent=2) + "\n",
        "src/.gitkeep": "",
    }


def _write(
    settings: Settings,
    shared: SharedDrafts | None,
    key: str,
    *,
    description: str,
    body: str,
    meta: dict[str, Any],
) -> Path:
    """Write a draft: a folder of its own, or with a shared store its row (validated first either way)."""
    slug = slug_of(key)
    files = skill_files(settings, slug, description=description, body=body)
    if shared is not None:
        validate_files(files, slug=slug, settings=settings)
        shared.put(key, slug=slug, files=files, meta=meta)
        return settings.drafts / key
    target = settings.drafts / key
    with staging(settings.drafts) as scratch:
        staged = scratch / key
        write_files(staged, {**files, "draft.json": json.dumps(meta, indent=2) + "\n"})
        validate_skill(staged, slug=slug, limits=settings.limits, require_manifest=True)
        swap_in(staged, target)
    return target


def write_draft(
    runtime: Runtime, *, name: str, description: str, body: str, source: dict[str, Any] | None, flags: list[str] | None
) -> Path:
    """Write a pending skill draft (replacing the same peer's older draft of that name); returns its folder
    (with a shared store, the folder it would have: its name is the draft's key either way)."""
    settings, shared = Settings.of(runtime), shared_of(runtime)
    slug = check_slug(name)
    description = " ".join(str(description or "").split())
    if not description:
        raise SkillError(f"skill draft {slug!r} needs a description")
    if "---" in description:
        raise SkillError(f"skill draft {slug!r}: the description must not contain '---' (it would end the frontmatter)")
    if not str(body or "").strip():
        raise SkillError(f"skill draft {slug!r} needs a body")
    key = draft_key(slug, source)
    meta = {
        "slug": slug,
        "source": dict(source or {}),
        "flags": [str(f) for f in flags or []],
        "created_at": _now_iso(),
    }
    path = _write(settings, shared, key, description=description, body=str(body), meta=meta)
    _audit(settings, shared, "draft", key, actor="reflection", source=meta["source"], flags=meta["flags"])
    return path


def shared_of(runtime: Runtime) -> SharedDrafts | None:
    """The shared store's drafts (`[storage] url`), drafts this host kept before taken into it first; else None."""
    shared = shared_drafts(runtime)
    if shared is not None and not shared.adopted:
        shared.adopted = True
        shared.adopt(Settings.of(runtime).drafts, _local_draft)
    return shared


def _local_draft(folder: Path) -> LocalDraft:
    """A draft folder as (key, slug, files, meta), for the shared store."""
    key = folder.name
    slug = slug_of(key)
    files = folder_files(folder, without=("draft.json",))
    if files is None:
        raise SkillError(f"{folder}: cannot read its files")
    return key, slug, files, _read_meta(folder)


def _read_meta(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / "draft.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SkillError(f"{folder / 'draft.json'}: cannot read: {exc}") from exc
    if not isinstance(meta, dict):
        raise SkillError(f"{folder / 'draft.json'}: expected a JSON object")
    return meta


def read_draft(settings: Settings, key: str) -> Draft:
    """One pending draft folder, with `error` set if it is not valid as it is."""
    folder = _draft_folder(settings, key)
    try:
        meta = _read_meta(folder)
        doc = validate_skill(folder, slug=slug_of(key), limits=settings.limits, require_manifest=True)
    except SkillError as exc:
        text = (
            (folder / "SKILL.md").read_text(encoding="utf-8", errors="replace")
            if (folder / "SKILL.md").is_file()
            else ""
        )
        return Draft(key, folder, text=text, source=_source_of(folder), error=str(exc))
    return Draft(
        key,
        folder,
        doc.description,
        doc.text,
        dict(meta.get("source") or {}),
        list(meta.get("flags") or []),
        str(meta.get("created_at", "")),
    )


def _stored_draft(settings: Settings, shared: SharedDrafts, key: str, files: Files, meta: dict[str, Any]) -> Draft:
    """A draft of the shared store, with `error` set if it is not valid as it is."""
    source = meta.get("source")
    source = dict(source) if isinstance(source, dict) else {}
    flags = [str(f) for f in meta.get("flags") or []]
    common: dict[str, Any] = {"source": source, "flags": flags, "where": shared.where(key)}
    try:
        doc = validate_files(files, slug=slug_of(key), settings=settings)
    except SkillError as exc:
        return Draft(key, settings.drafts / key, text=files.get("SKILL.md", ""), error=str(exc), **common)
    created = str(meta.get("created_at", ""))
    return Draft(key, settings.drafts / key, doc.description, doc.text, created_at=created, **common)


def _source_of(folder: Path) -> dict[str, Any]:
    """Whose session a draft came from, as far as its draft.json can say (an invalid draft still has an owner)."""
    try:
        source = _read_meta(folder).get("source")
    except SkillError:
        return {}
    return dict(source) if isinstance(source, dict) else {}


def list_drafts(runtime: Runtime) -> list[Draft]:
    """Every pending draft, by key (hidden staging and archive folders are not drafts)."""
    settings, shared = Settings.of(runtime), shared_of(runtime)
    if shared is not None:
        return [_stored_draft(settings, shared, key, files, meta) for key, files, meta in shared.pending()]
    if not settings.drafts.is_dir():
        return []
    names = sorted(p.name for p in settings.drafts.iterdir() if p.is_dir() and not p.name.startswith("."))
    drafts = []
    for name in names:
        try:
            drafts.append(read_draft(settings, name))
        except SkillError as exc:  # a folder whose name is not a valid key
            folder = settings.drafts / name
            drafts.append(Draft(name, folder, source=_source_of(folder), error=str(exc)))
    return drafts


def find_draft(runtime: Runtime, key: str) -> Draft | None:
    """One pending draft by key, or None."""
    slug_of(key)
    return next((draft for draft in list_drafts(runtime) if draft.key == key), None)


def drafts_where(runtime: Runtime) -> str:
    """Where this home's pending drafts are kept, for people."""
    shared = shared_of(runtime)
    return shared.where() if shared is not None else str(Settings.of(runtime).drafts)


def resolve_key(runtime: Runtime, name: str) -> str:
    """The draft key a person means by `name`: the key itself, or a slug only one pending draft has."""
    slug_of(name)  # a name that is neither a slug nor a key stops here, before any path is built
    shared = shared_of(runtime)
    exists = shared.get(name) is not None if shared is not None else (Settings.of(runtime).drafts / name).is_dir()
    if "--" in name or exists:
        return name
    keys = sorted(d.key for d in list_drafts(runtime) if d.slug == name)
    if len(keys) > 1:
        raise SkillError(f"several pending drafts of skill {name!r}: {', '.join(keys)}; name one of them")
    return keys[0] if keys else name


def _draft_folder(settings: Settings, key: str) -> Path:
    slug_of(key)
    folder = settings.drafts / key
    if not folder.is_dir() or folder.is_symlink():
        raise SkillError(f"no pending skill draft {key!r} in {settings.drafts}")
    return folder


def approve_draft(runtime: Runtime, key: str, *, actor: str) -> Decision:
    """Install a validated draft into the skills folder as its slug, commit it, audit it.

    With a shared store the draft is decided (once, whichever host asks first) and its skill stored
    for every host, then installed here; the other hosts install it at their next session start.
    """
    settings, shared = Settings.of(runtime), shared_of(runtime)
    slug = slug_of(key)
    target = settings.skills / slug
    if shared is not None:
        files, replaced = shared.approve(key, slug=slug, actor=actor)
        try:
            shared.install(slug, files)
            shared.installed(slug, files)
        except (OSError, SkillError) as exc:  # decided and stored: the next session start installs it here
            _audit(settings, shared, "approve", key, actor=actor, path=str(target), commit=None, replaced=replaced)
            return Decision(
                f"skill:{key}", target, f"approved skill {slug} for every host; not installed here yet: {exc}"
            )
    else:
        draft = _draft_folder(settings, key)
        validate_skill(draft, slug=slug, limits=settings.limits, require_manifest=True)
        replaced = target.exists()
        with staging(settings.skills) as scratch:
            staged = scratch / slug
            shutil.copytree(draft, staged, symlinks=True, ignore=shutil.ignore_patterns("draft.json"))
            validate_skill(staged, slug=slug, limits=settings.limits, require_manifest=True)
            swap_in(staged, target)
        shutil.rmtree(draft)
    commit = git_commit(target, f"Approve skill {slug} (by {actor})")
    _audit(settings, shared, "approve", key, actor=actor, path=str(target), commit=commit, replaced=replaced)
    note = f"committed {commit[:10]}" if commit else "not committed (no git repository)"
    everywhere = "; every host installs it from the shared store" if shared is not None else ""
    return Decision(f"skill:{key}", target, f"approved skill {slug}: installed in {target}, {note}{everywhere}", commit)


def approve(runtime: Runtime, key: str, *, actor: str) -> Path:
    """Approve a draft; returns the installed skill's folder."""
    return approve_draft(runtime, key, actor=actor).path


def reject(runtime: Runtime, key: str, *, actor: str, reason: str) -> Path | str:
    """Archive a draft with the reason; returns the archive folder (with a shared store, where it went)."""
    settings, shared = Settings.of(runtime), shared_of(runtime)
    reason = reason.strip() or "(no reason given)"
    if shared is not None:
        slug_of(key)
        shared.reject(key, actor=actor, reason=reason)
        where = f"{shared.db.where}, table rejected"
        _audit(settings, shared, "reject", key, actor=actor, reason=reason, path=where)
        return where
    draft = _draft_folder(settings, key)
    archive = settings.drafts / ".rejected" / f"{key}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%fZ')}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    os.rename(draft, archive)
    record = {"slug": slug_of(key), "key": key, "actor": actor, "reason": reason, "rejected_at": _now_iso()}
    (archive / "rejection.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    _audit(settings, shared, "reject", key, actor=actor, reason=reason, path=str(archive))
    return archive


def edit(runtime: Runtime, key: str, *, actor: str, text: str) -> Path:
    """Replace a draft's instructions (the SKILL.md body) with text; it stays pending."""
    settings, shared = Settings.of(runtime), shared_of(runtime)
    if shared is not None:
        slug_of(key)
        stored = shared.get(key)
        if stored is None:
            raise shared.decided(key)
        current = _stored_draft(settings, shared, key, *stored)
        meta = stored[1]
    else:
        current = read_draft(settings, key)
        meta = _read_meta(current.path)
    if current.error:
        raise SkillError(current.error)
    meta = meta | {"edited_by": actor, "edited_at": _now_iso()}
    if shared is not None:
        files = skill_files(settings, slug_of(key), description=current.description, body=text)
        validate_files(files, slug=slug_of(key), settings=settings)
        if not shared.replace(key, files=files, meta=meta):
            raise shared.decided(key)
        path = settings.drafts / key
    else:
        path = _write(settings, None, key, description=current.description, body=text, meta=meta)
    _audit(settings, shared, "edit", key, actor=actor)
    return path


def audit(settings: Settings, action: str, key: str, *, actor: str, **details: Any) -> None:
    """Append one action on the draft `key` to this host's audit log (`audit.jsonl`)."""
    _audit(settings, None, action, key, actor=actor, **details)


def _audit(
    settings: Settings, shared: SharedDrafts | None, action: str, key: str, *, actor: str, **details: Any
) -> None:
    """Append one action on the draft `key` to the audit log: the shared store's, else this host's file."""
    entry = {
        "at": time.time(),
        "action": action,
        "item_id": f"skill:{key}",
        "slug": slug_of(key),
        "key": key,
        "actor": actor,
        **details,
    }
    if shared is not None:
        shared.audit(entry)
        return
    settings.audit.parent.mkdir(parents=True, exist_ok=True)
    with _audit_lock, settings.audit.open("a", encoding="utf-8") as out:
        out.write(json.dumps(entry, ensure_ascii=False, default=str) + "\n")


def read_audit(runtime: Runtime) -> list[dict[str, Any]]:
    """Every audit entry, oldest first."""
    shared = shared_of(runtime)
    if shared is not None:
        return shared.audit_log()
    path = Settings.of(runtime).audit
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def forget(runtime: Runtime, *, peer: str, workspace: str, thread: str | None) -> dict[str, int]:
    """Delete the drafts (pending and rejected) reflected from the peer's sessions and blank their
    audit entries, never another peer's. An installed skill drafted from them is the humans' file:
    each is logged (file and line) for a person to edit and counted, never edited here."""
    settings, shared = Settings.of(runtime), shared_of(runtime)

    def theirs(source: Any) -> bool:
        return (
            isinstance(source, dict)
            and (source.get("workspace"), source.get("peer")) == (workspace, peer)
            and thread in (None, source.get("thread"))
        )

    installed: set[str] = set()

    def pick(entries: list[dict[str, Any]]) -> list[bool]:
        """Which audit entries are the peer's: their drafts and what was done to those (a key two owners
        share, from before drafts had owner keys, is left)."""
        drafted = [e for e in entries if e.get("action") == "draft"]
        keys = {_key(e) for e in drafted if theirs(e.get("source"))}
        others = {_key(e) for e in drafted if not theirs(e.get("source"))}

        def forgotten(entry: dict[str, Any]) -> bool:
            if entry.get("action") == "draft":
                return theirs(entry.get("source"))
            return _key(entry) in keys and _key(entry) not in others

        picked = [forgotten(e) for e in entries]
        approved = [e for e, gone in zip(entries, picked, strict=True) if gone and e.get("action") == "approve"]
        installed.update(str(e.get("slug")) for e in approved)
        return picked

    if shared is not None:
        deleted, blanked = shared.forget(peer=peer, workspace=workspace, thread=thread, pick=pick)
    else:
        deleted, blanked = _forget_files(settings, theirs, pick)
    to_edit = [settings.skills / slug / "SKILL.md" for slug in sorted(installed)]
    to_edit = [path for path in to_edit if path.is_file()]
    for path in to_edit:
        lines = len(path.read_text(encoding="utf-8", errors="replace").splitlines())
        logger.warning("%s:1-%d: approved skill drafted from forgotten peer %s; edit it by hand", path, lines, peer)
    return {"skill drafts": deleted, "audit entries blanked": blanked, "approved files to edit": len(to_edit)}


def _forget_files(
    settings: Settings, theirs: Callable[[Any], bool], pick: Callable[[list[dict[str, Any]]], list[bool]]
) -> tuple[int, int]:
    """Forget in this host's files: the peer's draft folders deleted, their audit entries blanked."""
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
        picked = pick(entries)
        kept = [
            {"at": e.get("at"), "action": e.get("action"), "forgotten": True} if gone else e
            for e, gone in zip(entries, picked, strict=True)
        ]
        blanked = sum(picked)
        if blanked:
            staged = settings.audit.with_name(f".{settings.audit.name}.tmp")
            lines = "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in kept)
            staged.write_text(lines, encoding="utf-8")
            os.replace(staged, settings.audit)
    return deleted, blanked


def _key(entry: dict[str, Any]) -> str:
    """The draft an audit entry is about (entries written before drafts had keys name only the slug)."""
    return str(entry.get("key") or entry.get("slug") or "")


def _audit_lines(settings: Settings) -> list[str]:
    if not settings.audit.exists():
        return []
    return [line for line in settings.audit.read_text(encoding="utf-8").splitlines() if line.strip()]


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
