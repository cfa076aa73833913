"""Nightly's own documents (snapshot weights, snapshot archive): files in reflection's data folder, or rows
of the `documents` table when the store is the shared PostgreSQL, so every worker ranks and archives alike.

Both kinds read and write whole texts by name; `update` is a read-modify-write that no other
writer interleaves with (a thread lock per file, or the store's cross-process lock).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from thoth_core.owners import Owner, split_owner
from thoth_core.storage import write_atomic

from .memory import MemoryFile, _lock
from .store import Store


class Documents(Protocol):
    """Named texts of reflection's data."""

    def where(self, name: str) -> str:
        """Where the document lives, for people."""
        ...

    def read(self, name: str) -> str | None:
        """The document's text, or None when there is none."""
        ...

    def write(self, name: str, text: str) -> None:
        """Replace the document's text."""
        ...

    def update(self, name: str, change: Callable[[str | None], str | None]) -> None:
        """Replace the text with `change(text)` (None: leave it), with no other writer in between."""
        ...

    def forget(self, name: str, owner: Owner) -> int:
        """Delete every line tagged with this owner; returns how many."""
        ...


class FileDocuments:
    """Documents as files of one folder (the SQLite mode: one host's data folder)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def where(self, name: str) -> str:
        return str(self.folder / name)

    def read(self, name: str) -> str | None:
        path = self.folder / name
        return path.read_text(encoding="utf-8") if path.exists() else None

    def write(self, name: str, text: str) -> None:
        write_atomic(self.folder / name, text)

    def update(self, name: str, change: Callable[[str | None], str | None]) -> None:
        with _lock(self.folder / name):
            changed = change(self.read(name))
            if changed is not None:
                self.write(name, changed)

    def forget(self, name: str, owner: Owner) -> int:
        return MemoryFile(self.folder / name).forget(owner)


class StoredDocuments:
    """Documents as rows of the store's `documents` table (the shared PostgreSQL)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def where(self, name: str) -> str:
        return f"{self.store.db.where}, documents row {name!r}"

    def read(self, name: str) -> str | None:
        rows = self.store.query("SELECT text FROM documents WHERE name = ?", name)
        return str(rows[0]["text"]) if rows else None

    def write(self, name: str, text: str) -> None:
        self.store.execute(
            "INSERT INTO documents (name, text, at) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET text = excluded.text, at = excluded.at",
            name,
            text,
            time.time(),
        )

    def update(self, name: str, change: Callable[[str | None], str | None]) -> None:
        with self.store.db.lock(f"document:{name}"):
            changed = change(self.read(name))
            if changed is not None:
                self.write(name, changed)

    def forget(self, name: str, owner: Owner) -> int:
        gone = 0

        def without(text: str | None) -> str | None:
            nonlocal gone
            lines = (text or "").splitlines(keepends=True)
            kept = [line for line in lines if split_owner(line.rstrip("\n"))[1] != owner]
            gone = len(lines) - len(kept)
            return "".join(kept) if gone else None

        self.update(name, without)
        return gone


def documents(st: Any) -> Documents:
    """The documents of a reflection state: rows when its store is shared, else files of its data folder."""
    return StoredDocuments(st.store) if st.store.shared else FileDocuments(st.dir)
