"""Writes a store's ANN index files (one per scope, see `ann_files`), in a child process: a native abort in usearch
ends that process, not the user's.

usearch 2.25.3 aborts (`free(): corrupted unsorted chunks`) in whichever process loads a file saved after
`remove()` once enough slots were removed (800 rows: 150 removed abort every restore, load and view, 100 do
not), and a removed vector's bytes stay in the saved file. So no file is ever saved with removed slots:
after removing, the writer adds as many vectors (rows waiting to be indexed, then random unit "fillers" under
keys from `FILLER_KEYS` up), and usearch reuses the removed slots for them, overwriting their bytes. Fillers
are never returned (callers drop their keys); once they outnumber the live rows the file is rebuilt from the
store instead. Recall searches one scope, so each scope has its own file: forgetting a peer deletes its files
(no removal at all), and forgetting a thread rewrites only that peer's. A scope with fewer than `--min-rows`
current rows has no file (its recall scores its rows exactly).

A run is incremental when the manifest is current (same delete generation, or every generation since it made
by the caller, named by `--generations`, whose touched scopes `--scopes` names): it looks at those scopes and
at those with rows or vectors newer than the manifest.
Otherwise (`--rebuild`, no manifest, a delete or supersede it did not see) it looks at every scope, and a scope
whose file still holds exactly its current rows is kept untouched (a count, no load). The writer holds the lock
while it reads the store and writes, so a build that read rows before a forget cannot save after that forget's
own write; it deletes temporary files left by writers that died, and it maps and searches each new file before
renaming it into place, so a file that would abort its reader is never installed. The last line it prints is
the manifest it saved, as JSON (progress lines before).

    python -m thoth_episodic.ann_writer DB DIM [--rebuild] [--min-rows N] [--scopes JSON] [--generations JSON]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .ann_files import (
    FORMAT,
    Scope,
    lock_path,
    manifest_path,
    read_manifest,
    remove_legacy,
    remove_scope,
    remove_stale_temporaries,
    scope_files,
    scope_paths,
    sidecar_paths,
    sidecars,
    write_json,
)

if TYPE_CHECKING:
    from usearch.index import Index

# Graph degree and insert beam: see `ann_index` for the measurements behind them.
CONNECTIVITY = 24
EXPANSION_ADD = 96
# One inserting thread: concurrent adds leave some nodes stored but unreachable by search (usearch issue #735,
# unfixed in 2.25/2.26); on two threads 0.03-0.13% of rows were never found even as their own nearest neighbour.
ADD_THREADS = 1
FILLER_KEYS = 1 << 62  # keys from here up are fillers, never rowids
FILLER_EXPANSION_ADD = 4  # a filler's own links need not be good: a narrow beam inserts it 2-3x faster than 16
CURRENT = "superseded_at IS NULL AND embedding IS NOT NULL"
IN_SCOPE = "workspace = ? AND peer = ? AND agent = ?"
BATCH = 5000


def new_index(dim: int) -> Index:
    """An empty index with this project's settings."""
    from usearch.index import Index

    return Index(ndim=dim, metric="ip", dtype="f16", connectivity=CONNECTIVITY, expansion_add=EXPANSION_ADD)


def unpack(rows: list[tuple[int, bytes]], dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(rowids, float32 matrix) of rows whose blob is a vector of this dimension."""
    good = [(r, b) for r, b in rows if b is not None and len(b) == 4 * dim]
    keys = np.array([r for r, _ in good], dtype=np.int64)
    matrix = np.frombuffer(b"".join(b for _, b in good), dtype=np.float32).reshape(len(good), dim)
    return keys, matrix


class LoadNeeded(Exception):
    """Raised by a writer told not to load: this run must read or write an index file (in the child)."""


class Writer:
    """One run of the writer over one store; see the module docstring.

    `loads=False` makes a run that only deletes files and writes JSON, safe in the user's process: it raises
    `LoadNeeded` as soon as a file would be loaded or built (a forget of whole peers never needs to).
    """

    def __init__(self, db_path: Path, dim: int, *, min_rows: int = 1, loads: bool = True) -> None:
        self.db_path, self.dim, self.min_rows, self.loads = Path(db_path), dim, max(1, min_rows), loads
        self.db = sqlite3.connect(self.db_path, timeout=60.0)

    def counters(self) -> tuple[int, int, int]:
        """The store's (newest rowid, vector version, generation), read before its rows."""
        values = dict(self.db.execute("SELECT key, CAST(value AS INTEGER) FROM meta").fetchall())
        newest = int(self.db.execute("SELECT coalesce(max(rowid), 0) FROM episodes").fetchone()[0])
        return newest, int(values["vectors"]), int(values["generation"])

    def rowids(self, scope: Scope, where: str, params: tuple[Any, ...]) -> np.ndarray:
        """Rowids of the scope's rows that also match `where`, ascending."""
        rows = self.db.execute(f"SELECT rowid FROM episodes WHERE {IN_SCOPE} AND {where}", (*scope, *params))
        return np.sort(np.fromiter((r[0] for r in rows), dtype=np.int64))

    def vectors_of(self, rowids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rowids, vectors) of these rows that are current and have a vector."""
        keys, matrices = [np.zeros(0, dtype=np.int64)], [np.zeros((0, self.dim), dtype=np.float32)]
        for start in range(0, len(rowids), BATCH):
            chunk = [int(r) for r in rowids[start : start + BATCH]]
            rows = self.db.execute(
                f"SELECT rowid, embedding FROM episodes WHERE rowid IN ({', '.join('?' * len(chunk))}) AND {CURRENT}",
                chunk,
            ).fetchall()
            found, matrix = unpack(rows, self.dim)
            keys.append(found)
            matrices.append(matrix)
            print(f"progress {len(chunk)}", flush=True)
        return np.concatenate(keys), np.concatenate(matrices)

    def touched(self, since_rowid: int, since_vectors: int, newest: int) -> set[Scope]:
        """Scopes with rows stored, or vectors set, after these counters."""
        rows = self.db.execute(
            "SELECT DISTINCT workspace, peer, agent FROM episodes WHERE rowid > ? AND rowid <= ? "
            "UNION SELECT DISTINCT workspace, peer, agent FROM episodes WHERE vector_version > ?",
            (since_rowid, newest, since_vectors),
        )
        return {tuple(r) for r in rows}  # type: ignore[misc]

    def every_scope(self, newest: int) -> set[Scope]:
        """Every scope with rows up to `newest`."""
        rows = self.db.execute("SELECT DISTINCT workspace, peer, agent FROM episodes WHERE rowid <= ?", (newest,))
        return {tuple(r) for r in rows}  # type: ignore[misc]

    def unchanged(self, scope: Scope, meta: dict[str, Any], newest: int) -> bool:
        """Whether the file still holds exactly the scope's current rows (counted, not loaded)."""
        covered, vectors = int(meta["rowid"]), int(meta["vectors"])
        kept = self.db.execute(
            f"SELECT count(*) FROM episodes WHERE {IN_SCOPE} AND {CURRENT} AND rowid <= ? AND vector_version <= ?",
            (*scope, covered, vectors),
        ).fetchone()[0]
        later = self.db.execute(
            f"SELECT count(*) FROM episodes WHERE {IN_SCOPE} AND {CURRENT} "
            "AND ((rowid > ? AND rowid <= ?) OR vector_version > ?)",
            (*scope, covered, newest, vectors),
        ).fetchone()[0]
        return not later and kept == int(meta["count"]) - int(meta["fillers"])

    def build(self, scope: Scope, newest: int) -> tuple[Index, int]:
        """A new index of the scope's current rows up to `newest` (progress lines as it goes); no fillers."""
        index = new_index(self.dim)
        keys, matrix = self.vectors_of(self.rowids(scope, f"rowid <= ? AND {CURRENT}", (newest,)))
        if len(keys):
            index.add(keys, matrix, threads=ADD_THREADS)
        return index, 0

    def update(self, scope: Scope, meta: dict[str, Any], newest: int) -> tuple[Index, int] | None:
        """The scope's saved index brought up to the store (None: rebuild instead, too many fillers)."""
        from usearch.index import Index

        index = Index.restore(str(scope_paths(self.db_path, scope)[0]))
        if index is None:
            raise ValueError("unreadable")
        index.expansion_add = EXPANSION_ADD  # type: ignore[misc]  # usearch's setter sits apart from its getter
        keys = np.asarray(index.keys, dtype=np.int64)
        fillers, keys = keys[keys >= FILLER_KEYS], keys[keys < FILLER_KEYS]
        alive = self.rowids(scope, f"rowid <= ? AND {CURRENT}", (newest,))
        changed = self.rowids(scope, f"vector_version > ? AND rowid <= ? AND {CURRENT}", (int(meta["vectors"]), newest))
        gone = np.union1d(keys[~np.isin(keys, alive)], np.intersect1d(keys, changed))
        added, matrix = self.vectors_of(np.union1d(alive[~np.isin(alive, keys)], changed))
        recycled = fillers[: max(0, len(added) - len(gone))]  # new rows take fillers' slots before new slots
        left = len(fillers) - len(recycled) + max(0, len(gone) - len(added))
        if left > len(keys) - len(gone) + len(added):
            return None
        freed = np.concatenate([gone, recycled])
        if len(freed):
            index.remove(freed)
        if len(added):
            index.add(added, matrix, threads=ADD_THREADS)
        holes = len(freed) - len(added)
        if holes > 0:  # overwrite the rest of the removed slots: their bytes must not reach the file
            start = int(fillers.max()) + 1 if len(fillers) else FILLER_KEYS
            filler = np.random.default_rng().standard_normal((holes, self.dim)).astype(np.float32)
            filler /= np.linalg.norm(filler, axis=1, keepdims=True)
            index.expansion_add = FILLER_EXPANSION_ADD  # type: ignore[misc]
            index.add(np.arange(start, start + holes, dtype=np.int64), filler, threads=ADD_THREADS)
        return index, left

    def save(self, scope: Scope, index: Index, fillers: int, newest: int, vectors: int) -> None:
        """Save, check the file in this process (mapped, searched, no removed slot), then rename it into place."""
        from usearch.index import Index

        path, meta_path = scope_paths(self.db_path, scope)
        temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        index.save(str(temporary))
        header = Index.metadata(str(temporary))
        if not header or header["count_deleted"] or header["count_present"] != len(index):
            raise RuntimeError(f"the saved index has removed slots or a wrong count: {header}")
        mapped = Index.restore(str(temporary), view=True)
        if mapped is None or len(mapped) != len(index):
            raise RuntimeError("the saved index does not map")
        if len(mapped):
            mapped.search(np.ones(self.dim, dtype=np.float32) / np.sqrt(self.dim), 1)
        bytes_ = temporary.stat().st_size
        del mapped
        os.replace(temporary, path)
        self.describe(scope, {"count": len(index), "fillers": fillers, "bytes": bytes_}, newest, vectors)

    def describe(self, scope: Scope, meta: dict[str, Any], newest: int, vectors: int) -> None:
        """Write a scope's sidecar: its file covers the scope's rows up to these counters."""
        write_json(
            scope_paths(self.db_path, scope)[1],
            {
                "format": FORMAT,
                "scope": list(scope),
                "dim": self.dim,
                "count": int(meta["count"]),
                "fillers": int(meta["fillers"]),
                "bytes": int(meta["bytes"]),
                "rowid": newest,
                "vectors": vectors,
            },
        )

    def write_scope(self, scope: Scope, known: dict[str, Any] | None, newest: int, vectors: int) -> str:
        """Bring one scope's file up to the store: what was done ("kept", "updated", "built", "deleted")."""
        alive = self.db.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM episodes WHERE {IN_SCOPE} AND {CURRENT} AND rowid <= ? LIMIT ?)",
            (*scope, newest, self.min_rows),
        ).fetchone()[0]
        if alive < self.min_rows:
            remove_scope(self.db_path, scope)
            return "deleted" if known is not None else "none"
        if known is not None and int(known.get("dim", 0)) == self.dim:
            if self.unchanged(scope, known, newest):
                self.describe(scope, known, newest, vectors)
                return "kept"
            if not self.loads:
                raise LoadNeeded(scope)
            updated = self.update(scope, known, newest)
            if updated is not None:
                self.save(scope, *updated, newest, vectors)
                return "updated"
        if not self.loads:
            raise LoadNeeded(scope)
        self.save(scope, *self.build(scope, newest), newest, vectors)
        return "built"

    def check(self) -> dict[str, Any]:
        """How the saved files differ from the store: forgotten rows still in them, current rows missing from them.

        A row is missing only if its file claims it: stored up to the file's rowid mark, with a vector no newer
        than the file's. A later row (or vector) waits for the next save: it is pending, and recall scores it exactly.
        """
        from usearch.index import Index

        manifest = read_manifest(self.db_path)
        if manifest is None or int(manifest.get("dim", 0)) != self.dim:
            return {"problem": "no manifest vouches for the files (missing, older layout, another dimension)"}
        found: dict[str, Any] = {"files": 0, "keys": 0, "fillers": 0, "forgotten": 0, "missing": 0}
        metas = sidecars(self.db_path)
        strays = len(scope_files(self.db_path)) - len(metas)
        for scope, meta in metas.items():
            index = Index.restore(str(scope_paths(self.db_path, scope)[0]), view=True)
            keys = np.asarray(index.keys if index is not None else [], dtype=np.int64)
            keys = keys[keys < FILLER_KEYS]
            covered, vectors = int(meta["rowid"]), int(meta["vectors"])
            rows = self.rowids(scope, "rowid <= ?", (covered,))
            current = self.rowids(scope, f"rowid <= ? AND vector_version <= ? AND {CURRENT}", (covered, vectors))
            found["files"] += 1
            found["keys"] += len(keys)
            found["fillers"] += int(meta["fillers"])
            found["forgotten"] += int((~np.isin(keys, rows)).sum())
            found["missing"] += int((~np.isin(current, keys)).sum())
        if strays > 0:
            found["problem"] = f"{strays} index files no sidecar vouches for (unreadable, removed slots, another file)"
        elif found["forgotten"] or found["missing"]:
            found["problem"] = (
                f"{found['forgotten']} deleted rows still in them, {found['missing']} current rows missing from them"
            )
        return found

    def run(self, *, rebuild: bool, scopes: list[Scope], generations: set[int]) -> dict[str, Any]:
        """Bring the files up to the store; returns the manifest (`rebuilt`: why every scope was looked at)."""
        try:
            return self._run_locked(rebuild=rebuild, scopes=scopes, generations=generations)
        finally:
            self.db.close()

    def _run_locked(self, *, rebuild: bool, scopes: list[Scope], generations: set[int]) -> dict[str, Any]:
        with open(lock_path(self.db_path), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_stale_temporaries(self.db_path)
            newest, vectors, generation = self.counters()
            why = "older layout" if remove_legacy(self.db_path) else "asked" if rebuild else ""
            manifest = None if why else read_manifest(self.db_path)
            if not why:
                if manifest is None:
                    why = "no manifest"
                elif int(manifest["dim"]) != self.dim or int(manifest["min_rows"]) != self.min_rows:
                    why = "another dimension or size"
                elif not set(range(int(manifest["generation"]) + 1, generation + 1)) <= generations:
                    why = "deletes or supersedes it was not told of"
            known = {} if rebuild else sidecars(self.db_path)
            if not why and len(scope_files(self.db_path)) + len(sidecar_paths(self.db_path)) != 2 * len(known):
                why = "files no sidecar vouches for"
            if why and not self.loads:
                raise LoadNeeded(why)
            if why:
                wanted = self.every_scope(newest) | set(known)
            else:
                assert manifest is not None
                wanted = set(scopes) | self.touched(int(manifest["rowid"]), int(manifest["vectors"]), newest)
            done: dict[str, int] = {}
            for scope in sorted(wanted):
                outcome = self.write_scope(scope, known.get(scope), newest, vectors)
                done[outcome] = done.get(outcome, 0) + 1
            if why:  # files no scope wants, or that no sidecar vouches for
                keep = {scope_paths(self.db_path, scope)[0] for scope in sidecars(self.db_path)}
                for path in scope_files(self.db_path) + [p.with_suffix("") for p in sidecar_paths(self.db_path)]:
                    if path not in keep:
                        path.unlink(missing_ok=True)
                        Path(f"{path}.json").unlink(missing_ok=True)
            saved = {
                "format": FORMAT,
                "dim": self.dim,
                "min_rows": self.min_rows,
                "rowid": newest,
                "vectors": vectors,
                "generation": generation,
            }
            write_json(manifest_path(self.db_path), saved)
        return {**saved, "scopes": done, "rebuilt": why}


def main(argv: list[str] | None = None) -> None:
    """The child process's entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("dim", type=int)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--min-rows", type=int, default=1, help="a scope with fewer current rows gets no file")
    parser.add_argument("--scopes", default="[]", help="JSON list of [workspace, peer, agent] to look at")
    parser.add_argument("--generations", default="[]", help="JSON list of the generations the caller made")
    parser.add_argument("--check", action="store_true", help="compare the files with the store; write nothing")
    args = parser.parse_args(argv)
    writer = Writer(Path(args.db), args.dim, min_rows=args.min_rows)
    if args.check:
        meta = writer.check()
    else:
        scopes = [tuple(s) for s in json.loads(args.scopes)]
        generations = {int(g) for g in json.loads(args.generations)}
        meta = writer.run(rebuild=args.rebuild, scopes=scopes, generations=generations)  # type: ignore[arg-type]
    sys.stdout.write(json.dumps(meta) + "\n")


if __name__ == "__main__":
    main()
