"""`thoth bundle`: the whole mind of an agent in one versioned .tar.gz, to move it between machines.

Layout: `manifest.json` first, then `sections/<name>.jsonl` (one record a line, written by each
layer's `bundle_export` hook, so a bundle made on one backend imports into another), then
`home/<path>` (the agent home's files: thoth.toml, persona, skills, knowledge, reflexion, ...).
The data folder, databases, lock and WAL files and `.git` are never copied raw. Reading checks
the manifest (format, version, sha256 of every member) and refuses unsafe member names before
anything is written, and so are members past the size limits (`[bundle]`, `Limits`): each home
file, each section, all members together, and the compression ratio of each large member and of
the whole (a few hundred KB of gzip can hold gigabytes of zeros). Sizes are read from the tar
headers before a member is inflated; a ratio is known once its member was read through (inflated
and thrown away, never kept in memory or on disk).
"""

from __future__ import annotations

import gzip
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
    from .config import Config
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
    for plugin, answer, _ in runtime.call_sync("bundle_export", runtime=runtime):  # not isolated: a failure stops it
        if answer is None:
            continue
        name = str(answer.get("name") or "")
        if not name or "/" in name or name in found:
            raise ThothError(f"plugin {plugin}: bundle_export: bad or duplicate section name {name!r}")
        found[name] = Section(plugin, name, int(answer["version"]), int(answer["count"]), answer["records"])
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
    raw: IO[bytes] | None = None  # the file under the gzip stream (the archive does not close it)

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
        """Close the archive and its file."""
        self.tar.close()
        if self.tar.fileobj is not None:
            self.tar.fileobj.close()  # the gzip stream: tarfile closes only what it opened itself
        if self.raw is not None:
            self.raw.close()


MB = 1 << 20
RATIO_FLOOR = MB  # a member (or bundle) smaller than this is not held to the ratio: its size is harmless
CHUNK = 16 << 10  # gzip reads the file this much at a time, so its position tells what was inflated so far
SLACK = 2 * CHUNK  # read ahead of what was inflated: a member's compressed size is at most its span plus this


class _Chunked:
    """The bundle file, read at most CHUNK bytes a call (gzip would read ahead 128 KiB and blur member spans)."""

    mode = "rb"

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle

    def read(self, size: int = -1) -> bytes:
        """Up to min(size, CHUNK) bytes (everything left for a negative size)."""
        return self.handle.read(size if size < 0 else min(size, CHUNK))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.handle, name)  # seek, tell, close, name


@dataclass(frozen=True)
class Limits:
    """What a bundle may hold, in bytes: each home file, each section, all members; and the gzip ratio."""

    file_bytes: int = 16 * MB
    section_bytes: int = 2048 * MB
    total_bytes: int = 4096 * MB
    ratio: float = 100.0

    @classmethod
    def of(cls, config: Config) -> Limits:
        """The limits `[bundle]` sets (`max_file_mb`, `max_section_mb`, `max_total_mb`, `max_ratio`)."""
        return cls(
            file_bytes=int(float(config.get("bundle.max_file_mb")) * MB),
            section_bytes=int(float(config.get("bundle.max_section_mb")) * MB),
            total_bytes=int(float(config.get("bundle.max_total_mb")) * MB),
            ratio=float(config.get("bundle.max_ratio")),
        )


def _size(n: float) -> str:
    return f"{n / MB:,.1f} MiB" if n >= MB / 10 else f"{int(n):,} bytes"


def _refused(path: Path, what: str) -> ThothError:
    return ThothError(f"{path}: {what}; nothing was imported")


def _check_size(path: Path, info: tarfile.TarInfo, total: int, limits: Limits) -> None:
    """Refuse a member whose header says it is larger than its limit, or that takes all members past theirs."""
    is_file = info.name.startswith("home/")
    limit, key, what = (
        (limits.file_bytes, "max_file_mb", "a home file")
        if is_file
        else (limits.section_bytes, "max_section_mb", "a section")
    )
    if info.size > limit:
        raise _refused(
            path, f"{info.name}: {_size(info.size)}, over the {_size(limit)} limit for {what} ([bundle] {key})"
        )
    if total > limits.total_bytes:
        raise _refused(
            path,
            f"{info.name}: takes the bundle to {_size(total)}, over its {_size(limits.total_bytes)} limit "
            "([bundle] max_total_mb)",
        )


def _check_ratio(path: Path, name: str, size: int, packed: int, limits: Limits, *, at_most: bool = True) -> None:
    """Refuse a member (or the whole bundle) that inflates more than `limits.ratio` times from `packed` bytes."""
    if size >= RATIO_FLOOR and size > limits.ratio * max(packed, 1):
        ratio, bound = size / max(packed, 1), ("at most ", "at least ") if at_most else ("", "")
        raise _refused(
            path,
            f"{name}: {_size(size)} from {bound[0]}{_size(packed)} compressed ({bound[1]}{ratio:,.0f}x), over the "
            f"{limits.ratio:g}x limit ([bundle] max_ratio)",
        )


def _members(path: Path, tar: tarfile.TarFile, raw: IO[bytes], limits: Limits) -> list[tarfile.TarInfo]:
    """Read the archive's headers in order, each checked against the limits as soon as it is read."""
    infos: list[tarfile.TarInfo] = []
    total, offset = 0, raw.tell()
    while True:
        info = tar.next()  # reading this header inflates the member before it (its bytes are dropped)
        if infos:
            here = raw.tell()
            _check_ratio(path, infos[-1].name, infos[-1].size, here - offset + SLACK, limits)
            offset = here
        if info is None:
            break
        if not safe_relative(info.name) or info.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
            raise ThothError(f"{path}: unsafe archive member {info.name!r} (absolute, '..', or not a plain file)")
        total += info.size
        _check_size(path, info, total, limits)
        infos.append(info)
    _check_ratio(path, "the bundle", total, path.stat().st_size, limits, at_most=False)
    return infos


def safe_relative(name: str) -> bool:
    """Whether an archive path stays inside the folder it is extracted to."""
    pure = PurePosixPath(name)
    return bool(name) and not pure.is_absolute() and ".." not in pure.parts and "\\" not in name and ":" not in name


def open_bundle(path: Path, *, limits: Limits | None = None) -> Bundle:
    """Open and check a bundle: format, version, safe member names, sizes and ratios (`limits`), every sha256."""
    limits = limits or Limits()
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise ThothError(f"{path}: not a readable Thoth bundle (.tar.gz): {exc}") from exc
    try:
        tar = tarfile.open(fileobj=gzip.GzipFile(fileobj=_Chunked(raw), mode="rb"), mode="r:")
        infos = _members(path, tar, raw, limits)
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        raw.close()
        raise ThothError(f"{path}: not a readable Thoth bundle (.tar.gz): {exc}") from exc
    except ThothError:
        raw.close()
        raise
    try:
        bundle = Bundle(path, {}, tar, {info.name: info for info in infos}, raw)
        for info in infos:
            if info.name.startswith("home/") and not home_file_name(info.name.removeprefix("home/")):
                raise ThothError(f"{path}: unsafe archive member {info.name!r} (git, database, lock or .env file)")
        bundle.manifest = _manifest(bundle)
        _verify(bundle)
        return bundle
    except (OSError, tarfile.TarError, EOFError, zlib.error) as exc:
        bundle.close()
        raise ThothError(f"{path}: corrupt Thoth bundle: {exc}") from exc
    except ThothError:
        bundle.close()
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
        answers = runtime.call_sync("bundle_import", section=section, runtime=runtime, progress=progress)
        added = next((answer for _, answer, _ in answers if answer is not None), None)  # firstresult: the owner's
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
    "Limits",
    "ensure_fresh",
    "export_bundle",
    "home_files",
    "import_bundle",
    "open_bundle",
    "plan_export",
    "sections_of",
]
