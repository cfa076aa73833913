"""Skill drafts, approved skills and their audit log in the shared store, for homes with `[storage] url`.

Every host of a shared home sees one set of drafts: reflection on host A writes a draft as a row
of the table `drafts` (schema `thoth_procedural`), and `thoth review` or `thoth skills list` on
host B lists it. A decision takes the draft's row out with one conditional DELETE, so of two
hosts deciding one draft at once exactly one wins (the other is told who decided); approving
stores the skill (table `skills`: its files and their digest) in the same transaction.

An approved skill is used as files in `.claude/skills/<slug>/`, where discovery, `/skill` and
Claude Code read skills: the approving host writes them at once, every other host at its next
session start (`sync`), which writes a skill the store has and the host lacks, and replaces a
local copy the store has changed since, as long as that copy is still the one written from the
store. A folder that differs from both (a person's own skill of that name, or an edit) is left
alone and named by `thoth doctor`. Such copies are not committed on the other hosts (the
approving host commits its copy when its home is a git repository).

Rejected drafts move to the table `rejected`. Drafts left in this host's `.claude/skill-drafts/`
from before the home was shared are taken into the store on first use (`adopt`).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core.database import Database, PostgresDatabase, storage_url
from thoth_core.storage import write_atomic

from .folders import Files, digest, folder_files, staging, swap_in, write_files
from .settings import NAME, Settings
from .validate import SkillDoc, SkillError, validate_skill

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

STATE_KEY = "procedural.shared"
POSTGRES = [
    """
    CREATE TABLE drafts (key TEXT PRIMARY KEY, slug TEXT NOT NULL, workspace TEXT, peer TEXT, thread TEXT,
                         files TEXT NOT NULL, meta TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE rejected (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, workspace TEXT, peer TEXT, thread TEXT,
                           files TEXT NOT NULL, meta TEXT NOT NULL, actor TEXT NOT NULL, reason TEXT NOT NULL,
                           at DOUBLE PRECISION NOT NULL);
    CREATE TABLE skills (slug TEXT PRIMARY KEY, files TEXT NOT NULL, digest TEXT NOT NULL, draft TEXT NOT NULL,
                         approved_by TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, at DOUBLE PRECISION NOT NULL, entry TEXT NOT NULL);
    CREATE TABLE decisions (id BIGSERIAL PRIMARY KEY, key TEXT NOT NULL, workspace TEXT, peer TEXT, thread TEXT,
                            action TEXT NOT NULL, actor TEXT NOT NULL, at DOUBLE PRECISION NOT NULL);
    CREATE INDEX decisions_key ON decisions(key);
    """,
]
SCRUBBED = ["drafts", "rejected", "audit", "decisions"]  # tables a forget deletes from or blanks
WRITTEN_FILE = "shared-skills.json"  # slug -> digest of the copy this host wrote from the store
FORGOTTEN = {"forgotten": True}
LocalDraft = tuple[str, str, Files, dict[str, Any]]  # (key, slug, files, meta) of a draft folder


def validate_files(files: Files, *, slug: str, settings: Settings) -> SkillDoc:
    """Validate a skill's files as a folder named `slug` would be (in a scratch folder)."""
    with tempfile.TemporaryDirectory(prefix="thoth-skill-") as scratch:
        folder = Path(scratch) / slug
        write_files(folder, files)
        return validate_skill(folder, slug=slug, limits=settings.limits, require_manifest=True)


INSERT_DRAFT = (
    "INSERT INTO drafts (key, slug, workspace, peer, thread, files, meta, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def draft_row(key: str, slug: str, files: Files, meta: dict[str, Any]) -> tuple[Any, ...]:
    """The values of a draft's row, in INSERT_DRAFT's order (its owner from `meta["source"]`)."""
    source = meta.get("source") or {}
    return (
        key,
        slug,
        source.get("workspace"),
        source.get("peer"),
        source.get("thread"),
        json.dumps(files),
        json.dumps(meta),
        time.time(),
    )


class SharedDrafts:
    """The drafts, approved skills and audit log of a shared home (see the module doc)."""

    def __init__(self, runtime: Runtime, url: str) -> None:
        self.settings = Settings.of(runtime)
        self.written_file = Path(runtime.home) / NAME / WRITTEN_FILE
        self.db: Database = PostgresDatabase(url, NAME, POSTGRES, rows=True)
        self.errors = self.db.errors
        self.lock = threading.Lock()  # this process's sync of the skills folder
        self.conflicts: dict[str, str] = {}  # slug -> why this host's folder is not the store's skill
        self.adopted = False  # whether this host's older draft folders were taken into the store

    def close(self) -> None:
        """Close the connections."""
        self.db.close()

    def where(self, key: str = "") -> str:
        """Where drafts live, for people."""
        return f"{self.db.where}, table drafts" + (f", key {key!r}" if key else "")

    # --- drafts -----------------------------------------------------------------------

    def put(self, key: str, *, slug: str, files: Files, meta: dict[str, Any]) -> None:
        """Store a pending draft, replacing a pending one of the same key (the same peer's older draft)."""
        self.db.execute(
            f"{INSERT_DRAFT} ON CONFLICT (key) DO UPDATE SET slug = excluded.slug, workspace = excluded.workspace,"
            " peer = excluded.peer, thread = excluded.thread, files = excluded.files, meta = excluded.meta,"
            " at = excluded.at",
            draft_row(key, slug, files, meta),
        )

    def get(self, key: str) -> tuple[Files, dict[str, Any]] | None:
        """A pending draft's files and meta, or None."""
        row = self.db.execute("SELECT files, meta FROM drafts WHERE key = ?", (key,)).fetchone()
        return None if row is None else (json.loads(row["files"]), json.loads(row["meta"]))

    def pending(self) -> list[tuple[str, Files, dict[str, Any]]]:
        """Every pending draft: (key, files, meta), by key."""
        rows = self.db.execute("SELECT key, files, meta FROM drafts ORDER BY key").fetchall()
        return [(row["key"], json.loads(row["files"]), json.loads(row["meta"])) for row in rows]

    def replace(self, key: str, *, files: Files, meta: dict[str, Any]) -> bool:
        """Change a pending draft's files and meta; False when it was decided meanwhile."""
        changed = self.db.execute(
            "UPDATE drafts SET files = ?, meta = ? WHERE key = ?", (json.dumps(files), json.dumps(meta), key)
        )
        return changed.rowcount == 1

    def approve(self, key: str, *, slug: str, actor: str) -> tuple[Files, bool]:
        """Decide a draft approved and store its skill, in one transaction; (its files, whether a skill was replaced).

        SkillError when the draft is not pending any more (decided on another host) or is not valid.
        """
        with self.db.transaction() as tx:
            row = tx.execute(
                "DELETE FROM drafts WHERE key = ? RETURNING workspace, peer, thread, files", (key,)
            ).fetchone()
            if row is None:
                raise self.decided(key)
            files = json.loads(row["files"])
            validate_files(files, slug=slug, settings=self.settings)
            self._decision(tx, key, row, "approve", actor)
            replaced = tx.execute("SELECT 1 FROM skills WHERE slug = ?", (slug,)).fetchone() is not None
            tx.execute(
                "INSERT INTO skills (slug, files, digest, draft, approved_by, at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (slug) DO UPDATE SET files = excluded.files, digest = excluded.digest,"
                " draft = excluded.draft, approved_by = excluded.approved_by, at = excluded.at",
                (slug, json.dumps(files), digest(files), key, actor, time.time()),
            )
        return files, replaced

    def reject(self, key: str, *, actor: str, reason: str) -> None:
        """Decide a draft rejected: moved to `rejected` with the reason (SkillError when decided already)."""
        with self.db.transaction() as tx:
            row = tx.execute(
                "DELETE FROM drafts WHERE key = ? RETURNING workspace, peer, thread, files, meta", (key,)
            ).fetchone()
            if row is None:
                raise self.decided(key)
            self._decision(tx, key, row, "reject", actor)
            now = time.time()
            tx.execute(
                "INSERT INTO rejected (key, workspace, peer, thread, files, meta, actor, reason, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, row["workspace"], row["peer"], row["thread"], row["files"], row["meta"], actor, reason, now),
            )

    @staticmethod
    def _decision(tx: Database, key: str, row: Any, action: str, actor: str) -> None:
        """Record who decided, in the deciding transaction (a host that lost the race reads it at once)."""
        tx.execute(
            "INSERT INTO decisions (key, workspace, peer, thread, action, actor, at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, row["workspace"], row["peer"], row["thread"], action, actor, time.time()),
        )

    def decided(self, key: str) -> SkillError:
        """The one line for a decision on a draft that is no longer pending: who decided it."""
        row = self.db.execute(
            "SELECT action, actor FROM decisions WHERE key = ? ORDER BY id DESC LIMIT 1", (key,)
        ).fetchone()
        if row is None:
            return SkillError(f"no pending skill draft {key!r} in {self.where()}")
        verb = "approved" if row["action"] == "approve" else "rejected"
        return SkillError(f"skill:{key} was already {verb} by {row['actor']}")

    # --- audit ------------------------------------------------------------------------

    def audit(self, entry: dict[str, Any]) -> None:
        """Append one audit entry."""
        self.db.execute(
            "INSERT INTO audit (at, entry) VALUES (?, ?)",
            (float(entry.get("at") or time.time()), json.dumps(entry, ensure_ascii=False, default=str)),
        )

    def audit_log(self) -> list[dict[str, Any]]:
        """Every audit entry, oldest first."""
        return [json.loads(row["entry"]) for row in self.db.execute("SELECT entry FROM audit ORDER BY id").fetchall()]

    # --- forget -----------------------------------------------------------------------

    def forget(
        self, *, peer: str, workspace: str, thread: str | None, pick: Callable[[list[dict[str, Any]]], list[bool]]
    ) -> tuple[int, int]:
        """Delete the peer's drafts (pending and rejected) and blank the audit entries `pick` marks, in one
        transaction; returns (drafts deleted, entries blanked). The deleted rows' pages are vacuumed after."""
        scope = "workspace = ? AND peer = ?" + (" AND thread = ?" if thread is not None else "")
        args = (workspace, peer) + ((thread,) if thread is not None else ())
        with self.db.transaction() as tx:
            deleted = tx.execute(f"DELETE FROM drafts WHERE {scope}", args).rowcount
            deleted += tx.execute(f"DELETE FROM rejected WHERE {scope}", args).rowcount
            tx.execute(f"DELETE FROM decisions WHERE {scope}", args)
            rows = tx.execute("SELECT id, entry FROM audit ORDER BY id").fetchall()
            entries = [json.loads(row["entry"]) for row in rows]
            blanked = 0
            for row, entry, gone in zip(rows, entries, pick(entries), strict=True):
                if gone:
                    blank = {"at": entry.get("at"), "action": entry.get("action"), **FORGOTTEN}
                    tx.execute("UPDATE audit SET entry = ? WHERE id = ?", (json.dumps(blank), row["id"]))
                    blanked += 1
        self.db.scrub(tables=SCRUBBED)
        return deleted, blanked

    # --- approved skills as files on this host ----------------------------------------

    def sync(self) -> list[str]:
        """Write into this host's skills folder each approved skill it lacks or has an outdated copy of; their slugs.

        A folder that is neither the store's skill nor the copy written from it before is left alone
        (`conflicts`). Raises the store's errors when it does not answer (callers go on with the files).
        """
        rows = self.db.execute("SELECT slug, digest FROM skills ORDER BY slug").fetchall()
        written: list[str] = []
        with self.lock:
            record = self._written()
            for row in rows:
                slug, wanted = str(row["slug"]), str(row["digest"])
                local = folder_files(self.settings.skills / slug)
                have = digest(local) if local is not None else None
                if have == wanted:
                    record[slug] = wanted
                    self.conflicts.pop(slug, None)
                    continue
                if have is not None and have != record.get(slug):
                    self.conflicts[slug] = (
                        f"{self.settings.skills / slug} differs from the skill approved in the shared store;"
                        " kept as it is (move it away to get the approved one)"
                    )
                    continue
                found = self.db.execute("SELECT files FROM skills WHERE slug = ?", (slug,)).fetchone()
                if found is None:
                    continue
                self.install(slug, json.loads(found["files"]))
                record[slug] = wanted
                self.conflicts.pop(slug, None)
                written.append(slug)
            self._save_written(record)
        if written:
            logger.info("procedural: wrote approved skills from the shared store: %s", ", ".join(written))
        return written

    def install(self, slug: str, files: Files) -> Path:
        """Write an approved skill's files as `.claude/skills/<slug>/` (built aside, validated, renamed in)."""
        target = self.settings.skills / slug
        with staging(self.settings.skills) as scratch:
            staged = scratch / slug
            write_files(staged, files)
            validate_skill(staged, slug=slug, limits=self.settings.limits, require_manifest=True)
            swap_in(staged, target)
        return target

    def installed(self, slug: str, files: Files) -> None:
        """Remember that this host's copy of `slug` is the store's (written by this host's approval)."""
        with self.lock:
            record = self._written()
            record[slug] = digest(files)
            self._save_written(record)

    def _written(self) -> dict[str, str]:
        try:
            loaded = json.loads(self.written_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return {str(k): str(v) for k, v in loaded.items()} if isinstance(loaded, dict) else {}

    def _save_written(self, record: dict[str, str]) -> None:
        if record != self._written():
            write_atomic(self.written_file, json.dumps(record, indent=1, sort_keys=True) + "\n")

    # --- drafts from before the home was shared ----------------------------------------

    def adopt(self, drafts_folder: Path, read: Callable[[Path], LocalDraft]) -> list[str]:
        """Take this host's draft folders into the store (`read(folder)` -> (key, slug, files, meta)); their keys.

        A folder whose key already waits in the store with other files stays (named by `thoth doctor`).
        """
        taken: list[str] = []
        if not drafts_folder.is_dir():
            return taken
        for folder in sorted(p for p in drafts_folder.iterdir() if p.is_dir() and not p.name.startswith(".")):
            try:
                key, slug, files, meta = read(folder)
            except SkillError as exc:
                logger.warning("procedural: %s: not taken into the shared store: %s", folder, exc)
                continue
            inserted = self.db.execute(
                f"{INSERT_DRAFT} ON CONFLICT (key) DO NOTHING", draft_row(key, slug, files, meta)
            ).rowcount
            stored = self.get(key)
            if inserted or (stored is not None and stored[0] == files):
                shutil.rmtree(folder)
                taken.append(key)
        if taken:
            logger.warning("procedural: took %d skill draft(s) of this host into the shared store", len(taken))
        return taken

    def local_drafts(self, drafts_folder: Path) -> list[str]:
        """Draft folders still on this host only (not taken into the store)."""
        if not drafts_folder.is_dir():
            return []
        return sorted(p.name for p in drafts_folder.iterdir() if p.is_dir() and not p.name.startswith("."))


def shared_drafts(runtime: Runtime) -> SharedDrafts | None:
    """This runtime's shared drafts when the home has a shared store (`[storage] url`), else None (files)."""
    url = storage_url(runtime.config)
    if url is None:
        return None
    return runtime.plugin_state(STATE_KEY, lambda: SharedDrafts(runtime, url))  # type: ignore[no-any-return]


def sync_skills(runtime: Runtime) -> list[str]:
    """With a shared store, write the skills approved on any host that this host lacks (`SharedDrafts.sync`);
    a store that does not answer leaves the skills folder as it is (one log line): it never stops a session."""
    shared = shared_drafts(runtime)
    if shared is None:
        return []
    failures: tuple[type[BaseException], ...] = (*shared.errors, OSError, SkillError)
    try:
        return shared.sync()
    except failures as exc:
        logger.warning("procedural: skills approved on other hosts not written here now: %s", exc)
        return []


__all__ = ["SharedDrafts", "shared_drafts", "sync_skills", "validate_files"]
