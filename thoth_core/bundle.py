"""`thoth bundle`: the whole mind of an agent in one versioned .tar.gz, to move it between machines.

Layout: `manifest.json` first, then `sections/<name>.jsonl` (one record a line, written by each
layer's `bundle_export` hook, so a bundle made on one backend imports into another), then
`home/<path>` (the agent home's files: thoth.toml, persona, skills, knowledge, reflexion, ...).
The data folder, databases, lock and WAL files and `.git` are never copied raw. Reading checks
the manifest (format, version, sha256 of every member) and refuses unsafe member names before
anything is written.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from .errors import ThothError
from .storage import write_atomic

if TYPE_CHECKING:
    from .runtime import Runtime

FORMAT = "thoth-bundle"
VERSION = 1
MANIFEST = "manifest.json"
SKIPPED_DIRS = {".git", "__pycache__", ".thoth"}
SKIPPED_SUFFIXES = (".db", ".sqlite", ".sqlite3", "-wal", "-shm", "-journal", ".lock", ".pyc")

Progress = Callable[[int], None]


def _thoth_version() -> str:
    try:
        return version("thoth-core")
    except PackageNotFoundError:
        return "unknown"


def _no_progress(_n: int) -> None:
    return None


@dataclass
class Section:
    """One layer's export: its name, format version, record count and records (possibly lazy)."""

    plugin: str
    name: str
    version: int
    count: int
    records: Any


def sections_of(runtime: Runtime) -> list[Section]:
    """Every layer's `bundle_export` answer; a plugin that fails stops the export (nothing is left out silently)."""
    found: dict[str, Section] = {}
    for impl in runtime.pm.hook.bundle_export.get_hookimpls():
        answer = impl.function(runtime=runtime)
        if answer is None:
            continue
        name = str(answer.get("name") or "")
        if not name or "/" in name or name in found:
            raise ThothError(f"plugin {impl.plugin_name}: bundle_export: bad or duplicate section name {name!r}")
        found[name] = Section(impl.plugin_name, name, int(answer["version"]), int(answer["count"]), answer["records"])
    return [found[name] for name in sorted(found)]


def own_section(section: dict[str, Any], name: str, version: int) -> bool:
    """Whether a `bundle_import` call is for this plugin's section; a version it cannot read stops the import."""
    if section["name"] != name:
        return False
    if section["version"] != version:
        raise ThothError(f"bundle section {name}: version {section['version']!r} unknown (this thoth reads {version})")
    return True


def home_file_name(relative: str) -> bool:
    """Whether a home-relative path is one a bundle may carry: no git, cache, database, lock or `.env` files."""
    parts = PurePosixPath(relative).parts
    return not (SKIPPED_DIRS.intersection(parts) or relative.endswith(SKIPPED_SUFFIXES) or parts[-1].startswith(".env"))


def home_files(runtime: Runtime, *, exclude: Path | None = None) -> list[tuple[str, Path]]:
    """The agent home's own files (relative POSIX path, path), without data, databases, locks or .git."""
    if runtime.config.path is None and runtime.config.root.resolve() != runtime.home.resolve():
        return []
    root = runtime.config.root.resolve()
    data = runtime.home.resolve()
    plugin_dirs = {name for name, _ in runtime.pm.list_name_plugin()} | {"journal.db"} if data == root else set()
    skipped = {exclude.resolve()} if exclude else set()
    found = []
    for folder, dirs, names in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(
            d
            for d in dirs
            if d not in SKIPPED_DIRS
            and (here / d).resolve() != data
            and not (here == root and d in plugin_dirs)
            and not (here / d).is_symlink()
        )
        for name in sorted(names):
            path = here / name
            if not home_file_name(name) or path.is_symlink() or path.resolve() in skipped:
                continue
            if here == root and name in plugin_dirs:
                continue
            found.append((path.relative_to(root).as_posix(), path))
    return found


def _sha256(handle: IO[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        digest.update(chunk)
    handle.seek(0)
    return digest.hexdigest()


def _add(tar: tarfile.TarFile, name: str, handle: IO[bytes], size: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = size, int(time.time()), 0o644
    tar.addfile(info, handle)


@dataclass
class ExportPlan:
    """What an export writes: every layer's section and the home's files."""

    sections: list[Section]
    files: list[tuple[str, Path]]

    @property
    def work(self) -> int:
        """How many records and files it writes (the progress bar's length)."""
        return sum(s.count for s in self.sections) + len(self.files)


def plan_export(runtime: Runtime, path: Path) -> ExportPlan:
    """Ask each layer for its section once and list the home's files (the bundle itself left out)."""
    return ExportPlan(sections_of(runtime), home_files(runtime, exclude=path))


def export_bundle(
    runtime: Runtime, path: Path, *, plan: ExportPlan | None = None, progress: Progress = _no_progress
) -> dict[str, Any]:
    """Write the bundle to path (atomically); returns its manifest. `progress(n)` ticks per record and file."""
    plan = plan or plan_export(runtime, path)
    sections, files = plan.sections, plan.files
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "thoth_version": _thoth_version(),
        "sections": {},
        "files": {},
    }
    spools = []
    try:
        for section in sections:
            spool = tempfile.TemporaryFile()
            spools.append(spool)
            written = 0
            for record in section.records:
                spool.write(json.dumps(record, ensure_ascii=False, default=str).encode() + b"\n")
                written += 1
                progress(1)
            spool.seek(0)
            manifest["sections"][section.name] = {
                "plugin": section.plugin,
                "version": section.version,
                "records": written,
                "sha256": _sha256(spool),
            }
        for relative, file in files:
            with file.open("rb") as handle:
                manifest["files"][relative] = {"size": file.stat().st_size, "sha256": _sha256(handle)}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            text = json.dumps(manifest, indent=2, ensure_ascii=False).encode()
            _add(tar, MANIFEST, io.BytesIO(text), len(text))
            for section, spool in zip(sections, spools, strict=True):
                size = spool.seek(0, 2)
                spool.seek(0)
                _add(tar, f"sections/{section.name}.jsonl", spool, size)
            for relative, file in files:
                with file.open("rb") as handle:
                    _add(tar, f"home/{relative}", handle, manifest["files"][relative]["size"])
                progress(1)
        os.replace(partial, path)
    finally:
        for spool in spools:
            spool.close()
        path.with_name(path.name + ".partial").unlink(missing_ok=True)
    return manifest


@dataclass
class Bundle:
    """An opened, checked bundle: its manifest and the open archive."""

    path: Path
    manifest: dict[str, Any]
    tar: tarfile.TarFile
    members: dict[str, tarfile.TarInfo] = field(default_factory=dict)

    def records(self, name: str) -> Iterator[dict[str, Any]]:
        """The records of one section, in order."""
        handle = self.tar.extractfile(self.members[f"sections/{name}.jsonl"])
        assert handle is not None
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
            except ValueError as exc:
                raise ThothError(f"{self.path}: sections/{name}.jsonl:{number}: not JSON: {exc}") from exc
            if not isinstance(record, dict):
                raise ThothError(f"{self.path}: sections/{name}.jsonl:{number}: expected an object")
            yield record

    def file_bytes(self, relative: str) -> bytes:
        """The bytes of one home file."""
        handle = self.tar.extractfile(self.members[f"home/{relative}"])
        assert handle is not None
        return handle.read()

    def close(self) -> None:
        """Close the archive."""
        self.tar.close()


def safe_relative(name: str) -> bool:
    """Whether an archive path stays inside the folder it is extracted to."""
    pure = PurePosixPath(name)
    return bool(name) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in name and ":" not in name


def open_bundle(path: Path) -> Bundle:
    """Open and check a bundle: format, version, safe member names, every member's sha256."""
    try:
        tar = tarfile.open(path, "r:gz")
        infos = tar.getmembers()
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raise ThothError(f"{path}: not a readable Thoth bundle (.tar.gz): {exc}") from exc
    try:
        bundle = Bundle(path, {}, tar, {info.name: info for info in infos})
        for info in infos:
            if not safe_relative(info.name) or not info.isfile():
                raise ThothError(f"{path}: unsafe archive member {info.name!r} (absolute, '..', or not a plain file)")
            if info.name.startswith("home/") and not home_file_name(info.name.removeprefix("home/")):
                raise ThothError(f"{path}: unsafe archive member {info.name!r} (git, database, lock or .env file)")
        bundle.manifest = _manifest(bundle)
        _verify(bundle)
        return bundle
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        tar.close()
        raise ThothError(f"{path}: corrupt Thoth bundle: {exc}") from exc
    except ThothError:
        tar.close()
        raise


def _manifest(bundle: Bundle) -> dict[str, Any]:
    if MANIFEST not in bundle.members:
        raise ThothError(f"{bundle.path}: not a Thoth bundle (no {MANIFEST})")
    handle = bundle.tar.extractfile(bundle.members[MANIFEST])
    try:
        manifest = json.loads(handle.read() if handle else b"")
    except ValueError as exc:
        raise ThothError(f"{bundle.path}: {MANIFEST}: not JSON: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ThothError(f"{bundle.path}: not a Thoth bundle (format {found!r}, expected {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise ThothError(
            f"{bundle.path}: bundle version {manifest.get('version')!r} is not one this thoth reads ({VERSION}); "
            f"it was made by thoth {manifest.get('thoth_version', '?')}"
        )
    for key in ("sections", "files"):
        if not isinstance(manifest.get(key), dict):
            raise ThothError(f"{bundle.path}: {MANIFEST}: {key}: expected an object")
    return manifest


def _verify(bundle: Bundle) -> None:
    expected = {f"sections/{name}.jsonl": s for name, s in bundle.manifest["sections"].items()}
    expected |= {f"home/{name}": f for name, f in bundle.manifest["files"].items()}
    for member, entry in expected.items():
        if member not in bundle.members or not safe_relative(member):
            raise ThothError(f"{bundle.path}: {member}: listed in {MANIFEST} but missing from the archive")
        handle = bundle.tar.extractfile(bundle.members[member])
        if handle is None or _sha256(handle) != entry.get("sha256"):
            raise ThothError(f"{bundle.path}: {member}: sha256 does not match {MANIFEST} (corrupt bundle)")
    extra = set(bundle.members) - set(expected) - {MANIFEST}
    if extra:
        raise ThothError(f"{bundle.path}: {sorted(extra)[0]}: in the archive but not in {MANIFEST}")


@dataclass
class ImportReport:
    """What an import did: records added per section, files written, kept or unchanged, sections nobody read."""

    added: dict[str, dict[str, int]] = field(default_factory=dict)
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    unread: dict[str, int] = field(default_factory=dict)
    commit: str | None = None


def ensure_fresh(runtime: Runtime) -> None:
    """Raise unless every layer is empty (what an import without --merge needs)."""
    held = {s.name: s.count for s in sections_of(runtime) if s.count}
    if held:
        what = ", ".join(f"{name}: {n}" for name, n in sorted(held.items()))
        raise ThothError(
            f"{runtime.home}: already holds memory ({what}); import into a fresh `thoth init` home, or pass --merge"
        )


def import_bundle(runtime: Runtime, bundle: Bundle, *, merge: bool, progress: Progress = _no_progress) -> ImportReport:
    """Add a checked bundle's records to the layers and its files to the agent home.

    Without `merge` the layers must hold nothing yet, and every file is written (a fresh `thoth init`
    home's templates are replaced); with it records are merged (known ones skipped) and a home file
    that differs from the bundle's copy is kept and reported.
    """
    if not merge:
        ensure_fresh(runtime)
    report = ImportReport()
    root = runtime.config.root.resolve()
    for relative in sorted(bundle.manifest["files"]):
        target = (root / relative).resolve()
        if not target.is_relative_to(root) or root == target:
            raise ThothError(f"{bundle.path}: home/{relative}: would be written outside {root}")
        if target.is_relative_to(runtime.home.resolve()):
            raise ThothError(f"{bundle.path}: home/{relative}: would be written into the data folder {runtime.home}")
        data = bundle.file_bytes(relative)
        if target.is_file() and target.read_bytes() == data:
            report.unchanged.append(relative)
        elif target.exists() and merge:
            report.kept.append(relative)
        else:
            write_atomic(target, data)
            report.written.append(relative)
        progress(1)
    for name, entry in sorted(bundle.manifest["sections"].items()):
        section = {"name": name, "version": entry.get("version"), "count": entry.get("records", 0)}
        section["records"] = bundle.records(name)
        added = runtime.pm.hook.bundle_import(section=section, runtime=runtime, progress=progress)
        if added is None:
            report.unread[name] = int(entry.get("records", 0))
        else:
            report.added[name] = dict(added)
    tracked = _not_ignored(root, report.written)
    if tracked:
        from .git import git_commit

        report.commit = git_commit(root, f"Import bundle {bundle.path.name}", only=[root / n for n in tracked])
    return report


def _not_ignored(root: Path, relatives: list[str]) -> list[str]:
    """The paths git would track in root's repository (none when root is not one)."""
    if not relatives or not (root / ".git").exists():
        return []
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "check-ignore", "--stdin"],
            input="\n".join(relatives),
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    ignored = set(done.stdout.splitlines())
    return [r for r in relatives if r not in ignored]


def import_work(bundle: Bundle) -> int:
    """How many records and files an import goes through (the progress bar's length)."""
    return len(bundle.manifest["files"]) + sum(int(s.get("records", 0)) for s in bundle.manifest["sections"].values())


__all__ = [
    "FORMAT",
    "VERSION",
    "Bundle",
    "ExportPlan",
    "ImportReport",
    "ensure_fresh",
    "export_bundle",
    "home_files",
    "import_bundle",
    "open_bundle",
    "plan_export",
    "sections_of",
]
