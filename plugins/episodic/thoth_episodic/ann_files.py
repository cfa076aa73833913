"""Where a store's ANN index files live and what vouches for them: one file per scope, a sidecar each, a manifest.

A scope is (workspace, peer, agent), what one recall searches. Its file is `<db>.usearch-<key>` (the key a hash
of the scope) with a sidecar `<db>.usearch-<key>.json` naming the scope, the newest rowid and vector version the
file covers, its size, count and fillers. The manifest `<db>.usearch-scopes.json` names the newest rowid, vector
version and delete generation the whole set covers: every scope with rows up to that rowid has its file, or has
too few rows for one (`min_rows`). Writers hold `<db>.usearch.lock`. A store indexed before (format 2) had one
file, `<db>.usearch` with `<db>.usearch.json`: it is deleted by the next writer, which builds the new layout.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

FORMAT = 3
Scope = tuple[str, str, str]  # workspace, peer, agent


def scope_key(scope: Scope) -> str:
    """The file-name key of a scope (names may hold any character)."""
    return hashlib.sha256("\0".join(scope).encode()).hexdigest()[:24]


def scope_paths(db_path: Path | str, scope: Scope) -> tuple[Path, Path]:
    """A scope's index file and its sidecar."""
    base = f"{db_path}.usearch-{scope_key(scope)}"
    return Path(base), Path(f"{base}.json")


def manifest_path(db_path: Path | str) -> Path:
    """The manifest of a store's index files."""
    return Path(f"{db_path}.usearch-scopes.json")


def lock_path(db_path: Path | str) -> Path:
    """The lock a writer holds while it reads the store and writes files."""
    return Path(f"{db_path}.usearch.lock")


def legacy_paths(db_path: Path | str) -> tuple[Path, Path]:
    """The single index file (and sidecar) of stores indexed before one file per scope."""
    return Path(f"{db_path}.usearch"), Path(f"{db_path}.usearch.json")


def every_file(db_path: Path | str) -> list[Path]:
    """Every index file beside the store: scope files, sidecars, the manifest and the older layout's."""
    found = scope_files(db_path) + sidecar_paths(db_path) + [manifest_path(db_path), *legacy_paths(db_path)]
    return [path for path in found if path.exists()]


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from a file, or None when missing or unreadable."""
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Write a JSON object atomically (a temporary file renamed into place)."""
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(data))
    os.replace(temporary, path)


def read_manifest(db_path: Path | str) -> dict[str, Any] | None:
    """The manifest when it is of this format."""
    found = read_json(manifest_path(db_path))
    return found if found is not None and found.get("format") == FORMAT else None


def read_sidecar(path: Path, meta_path: Path) -> dict[str, Any] | None:
    """A scope file's sidecar when it describes the file beside it (format, size, count) and it has no removed slot."""
    from usearch.index import Index

    meta = read_json(meta_path)
    try:
        if meta is None or meta.get("format") != FORMAT or int(meta["bytes"]) != path.stat().st_size:
            return None
        header = Index.metadata(str(path))  # the header only: loading a file with removed slots may abort
        if not header or header["count_deleted"] or header["count_present"] != int(meta["count"]):
            return None
        meta["scope"] = tuple(meta["scope"])
        return meta
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


def sidecar_paths(db_path: Path | str) -> list[Path]:
    """Every scope sidecar beside the store (vouching or not)."""
    db_path = Path(db_path)
    manifest = manifest_path(db_path).name
    return sorted(p for p in db_path.parent.glob(f"{db_path.name}.usearch-*.json") if p.name != manifest)


def scope_files(db_path: Path | str) -> list[Path]:
    """Every scope index file beside the store."""
    db_path = Path(db_path)
    return sorted(p for p in db_path.parent.glob(f"{db_path.name}.usearch-*") if not p.name.endswith((".json", ".tmp")))


def sidecars(db_path: Path | str) -> dict[Scope, dict[str, Any]]:
    """The sidecar of every scope file that one vouches for, by scope."""
    found = {}
    for meta_path in sidecar_paths(db_path):
        meta = read_sidecar(meta_path.with_suffix(""), meta_path)
        if meta is not None and scope_paths(db_path, meta["scope"])[0] == meta_path.with_suffix(""):
            found[meta["scope"]] = meta
    return found


def remove_stale_temporaries(db_path: Path | str) -> None:
    """Temporary files of writers that died (the caller holds the lock: no live writer has one)."""
    db_path = Path(db_path)
    for stale in db_path.parent.glob(f"{db_path.name}.usearch*.tmp"):
        stale.unlink(missing_ok=True)


def remove_scope(db_path: Path | str, scope: Scope) -> None:
    """Delete a scope's file and sidecar (the caller holds the lock)."""
    for path in scope_paths(db_path, scope):
        path.unlink(missing_ok=True)


def remove_legacy(db_path: Path | str) -> bool:
    """Delete the single file of the older layout; whether there was one."""
    there = False
    for path in legacy_paths(db_path):
        there |= path.exists()
        path.unlink(missing_ok=True)
    return there


def discard_files(db_path: Path | str, scopes: Iterable[Scope] | None = None) -> None:
    """Delete these scopes' files (None: every index file), and the older layout's, once a running writer is done."""
    db_path = Path(db_path)
    wanted = None if scopes is None else [p for s in scopes for p in scope_paths(db_path, s)]
    present = [p for p in wanted if p.exists()] if wanted is not None else scope_files(db_path) + sidecar_paths(db_path)
    legacy = [p for p in legacy_paths(db_path) if p.exists()]
    temporaries = list(db_path.parent.glob(f"{db_path.name}.usearch*.tmp"))
    if not (present or legacy or temporaries):
        return
    with open(lock_path(db_path), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        remove_stale_temporaries(db_path)
        for path in present + legacy:
            path.unlink(missing_ok=True)
        if scopes is None:
            manifest_path(db_path).unlink(missing_ok=True)
