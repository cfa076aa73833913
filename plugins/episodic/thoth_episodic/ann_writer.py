"""Writes a store's ANN index file, in a child process: a native abort in usearch ends that process, not the user's.

usearch 2.25.3 aborts (`free(): corrupted unsorted chunks`) in whichever process loads a file saved after
`remove()` once enough slots were removed (800 rows: 150 removed abort every restore, load and view, 100 do
not), and a removed vector's bytes stay in the saved file. So no file is ever saved with removed slots:
after removing, the writer adds as many vectors (rows waiting to be indexed, then random unit "fillers" under
keys from `FILLER_KEYS` up), and usearch reuses the removed slots for them, overwriting their bytes. Fillers
are never returned (callers drop their keys); once they outnumber the live rows the file is rebuilt from the
store instead. The writer holds `<file>.lock` while it reads the store and writes, so a build that read rows
before a forget cannot save after that forget's own write; it deletes temporary files left by writers that
died, and it maps and searches its new file before renaming it into place, so a file that would abort its
reader is never installed. The last line it prints is the sidecar it saved, as JSON (progress lines before).

    python -m thoth_episodic.ann_writer DB DIM [--rebuild]
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

if TYPE_CHECKING:
    from usearch.index import Index

FORMAT = 2  # the sidecar's format: files of format 1 may hold removed slots and are rebuilt unread
# Graph degree and insert beam: see `ann_index` for the measurements behind them.
CONNECTIVITY = 24
EXPANSION_ADD = 96
# One inserting thread: concurrent adds leave some nodes stored but unreachable by search (usearch issue #735,
# unfixed in 2.25/2.26); on two threads 0.03-0.13% of rows were never found even as their own nearest neighbour.
ADD_THREADS = 1
FILLER_KEYS = 1 << 62  # keys from here up are fillers, never rowids
FILLER_EXPANSION_ADD = 4  # a filler's own links need not be good: a narrow beam inserts it 2-3x faster than 16
CURRENT = "superseded_at IS NULL AND embedding IS NOT NULL"
BATCH = 5000


def index_paths(db_path: Path | str) -> tuple[Path, Path]:
    """The index file and its sidecar for a store."""
    return Path(f"{db_path}.usearch"), Path(f"{db_path}.usearch.json")


def read_sidecar(db_path: Path | str) -> dict[str, Any] | None:
    """The sidecar when it describes the file beside it (format, size, count) and the file has no removed slot."""
    from usearch.index import Index

    path, meta_path = index_paths(db_path)
    try:
        meta = json.loads(meta_path.read_text())
        if int(meta.get("format", 1)) != FORMAT or int(meta["bytes"]) != path.stat().st_size:
            return None
        header = Index.metadata(str(path))  # the header only: loading a file with removed slots may abort
        if not header or header["count_deleted"] or header["count_present"] != int(meta["count"]):
            return None
        return dict(meta)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


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


def remove_stale_temporaries(path: Path) -> None:
    """Temporary files of writers that died (the caller holds the lock: no live writer has one)."""
    for stale in path.parent.glob(f"{path.name}*.tmp"):
        stale.unlink(missing_ok=True)


def discard_files(db_path: Path | str) -> None:
    """Delete the index file, its sidecar and any temporaries, once a running writer is done."""
    path, meta_path = index_paths(db_path)
    if not (path.exists() or meta_path.exists() or any(path.parent.glob(f"{path.name}*.tmp"))):
        return
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        remove_stale_temporaries(path)
        path.unlink(missing_ok=True)
        meta_path.unlink(missing_ok=True)


class Writer:
    """One run of the writer over one store; see the module docstring."""

    def __init__(self, db_path: Path, dim: int) -> None:
        self.db_path, self.dim = Path(db_path), dim
        self.path, self.meta_path = index_paths(db_path)
        self.db = sqlite3.connect(self.db_path, timeout=60.0)

    def counters(self) -> tuple[int, int, int]:
        """The store's (newest rowid, vector version, generation), read before its rows."""
        values = dict(self.db.execute("SELECT key, CAST(value AS INTEGER) FROM meta").fetchall())
        newest = int(self.db.execute("SELECT coalesce(max(rowid), 0) FROM episodes").fetchone()[0])
        return newest, int(values["vectors"]), int(values["generation"])

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
        return np.concatenate(keys), np.concatenate(matrices)

    def build(self, newest: int) -> tuple[Index, int]:
        """A new index of every current row up to `newest` (progress lines as it goes); no fillers."""
        index, last = new_index(self.dim), 0
        while True:
            rows = self.db.execute(
                f"SELECT rowid, embedding FROM episodes WHERE rowid > ? AND rowid <= ? AND {CURRENT} "
                f"ORDER BY rowid LIMIT {BATCH}",
                (last, newest),
            ).fetchall()
            if not rows:
                return index, 0
            keys, matrix = unpack(rows, self.dim)
            if len(keys):
                index.add(keys, matrix, threads=ADD_THREADS)
            last = int(rows[-1][0])
            print(f"progress {len(rows)}", flush=True)

    def update(self, meta: dict[str, Any], newest: int, vectors: int) -> tuple[Index, int] | None:
        """The saved index brought up to the store (None: rebuild instead, too many fillers)."""
        from usearch.index import Index

        index = Index.restore(str(self.path))
        if index is None:
            raise ValueError("unreadable")
        index.expansion_add = EXPANSION_ADD
        keys = np.asarray(index.keys, dtype=np.int64)
        fillers, keys = keys[keys >= FILLER_KEYS], keys[keys < FILLER_KEYS]
        alive = np.fromiter(
            (r[0] for r in self.db.execute(f"SELECT rowid FROM episodes WHERE rowid <= ? AND {CURRENT}", (newest,))),
            dtype=np.int64,
        )
        changed = np.zeros(0, dtype=np.int64)
        if vectors != int(meta["vectors"]):  # vectors set since the save (a reindex): their slots are rewritten
            changed = np.fromiter(
                (
                    r[0]
                    for r in self.db.execute(
                        f"SELECT rowid FROM episodes WHERE vector_version > ? AND rowid <= ? AND {CURRENT}",
                        (int(meta["vectors"]), newest),
                    )
                ),
                dtype=np.int64,
            )
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
            index.expansion_add = FILLER_EXPANSION_ADD
            index.add(np.arange(start, start + holes, dtype=np.int64), filler, threads=ADD_THREADS)
        return index, left

    def save(self, index: Index, fillers: int, newest: int, vectors: int, generation: int) -> dict[str, Any]:
        """Save, check the file in this process (mapped, searched, no removed slot), then rename it into place."""
        from usearch.index import Index

        unique = f"{os.getpid()}.tmp"
        temporary = self.path.with_name(f"{self.path.name}.{unique}")
        index.save(str(temporary))
        header = Index.metadata(str(temporary))
        if not header or header["count_deleted"] or header["count_present"] != len(index):
            raise RuntimeError(f"the saved index has removed slots or a wrong count: {header}")
        mapped = Index.restore(str(temporary), view=True)
        if mapped is None or len(mapped) != len(index):
            raise RuntimeError("the saved index does not map")
        if len(mapped):
            mapped.search(np.ones(self.dim, dtype=np.float32) / np.sqrt(self.dim), 1)
        meta = {
            "format": FORMAT,
            "dim": self.dim,
            "count": len(index),
            "fillers": fillers,
            "bytes": temporary.stat().st_size,
            "rowid": newest,
            "vectors": vectors,
            "generation": generation,
        }
        meta_temporary = self.meta_path.with_name(f"{self.meta_path.name}.{unique}")
        meta_temporary.write_text(json.dumps(meta))
        os.replace(temporary, self.path)
        os.replace(meta_temporary, self.meta_path)
        return meta

    def check(self) -> dict[str, Any]:
        """How the saved file differs from the store: forgotten rows still in it, current rows missing from it."""
        from usearch.index import Index

        meta = read_sidecar(self.db_path)
        if meta is None:
            return {"problem": "no sidecar vouches for it (missing, older format, another file, removed slots)"}
        index = Index.restore(str(self.path), view=True)
        keys = np.asarray(index.keys if index is not None else [], dtype=np.int64)
        keys = keys[keys < FILLER_KEYS]
        covered = int(meta["rowid"])
        rows = np.fromiter(
            (r[0] for r in self.db.execute("SELECT rowid FROM episodes WHERE rowid <= ?", (covered,))), dtype=np.int64
        )
        current = np.fromiter(
            (r[0] for r in self.db.execute(f"SELECT rowid FROM episodes WHERE rowid <= ? AND {CURRENT}", (covered,))),
            dtype=np.int64,
        )
        forgotten = int((~np.isin(keys, rows)).sum())
        missing = int((~np.isin(current, keys)).sum())
        found = {"keys": len(keys), "fillers": int(meta.get("fillers", 0)), "forgotten": forgotten, "missing": missing}
        if forgotten or missing:
            found["problem"] = f"{forgotten} deleted rows still in it, {missing} current rows missing from it"
        return found

    def run(self, *, rebuild: bool) -> dict[str, Any]:
        """Bring the file up to the store (or rebuild it); returns the sidecar, with `rebuilt` naming why, if it was."""
        with open(f"{self.path}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            remove_stale_temporaries(self.path)
            newest, vectors, generation = self.counters()
            meta = None if rebuild else read_sidecar(self.db_path)
            why = "asked" if rebuild else "" if meta is not None or not self.path.exists() else "unusable file"
            updated = None
            if meta is not None:
                if int(meta["dim"]) != self.dim:
                    why = f"dimension {meta['dim']}, expected {self.dim}"
                else:
                    updated = self.update(meta, newest, vectors)
                    why = "" if updated is not None else "fillers outnumber the rows"
            index, fillers = updated if updated is not None else self.build(newest)
            saved = self.save(index, fillers, newest, vectors, generation)
        self.db.close()
        return {**saved, "rebuilt": why} if why else saved


def main(argv: list[str] | None = None) -> None:
    """The child process's entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db")
    parser.add_argument("dim", type=int)
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--check", action="store_true", help="compare the file with the store; write nothing")
    args = parser.parse_args(argv)
    writer = Writer(Path(args.db), args.dim)
    meta = writer.check() if args.check else writer.run(rebuild=args.rebuild)
    sys.stdout.write(json.dumps(meta) + "\n")


if __name__ == "__main__":
    main()
