"""Marked sections of home files that every host must see alike (reflection's parts of `persona/MEMORY.md`).

A plugin may keep parts of a home file between `<!-- thoth:NAME -->` and `<!-- /thoth:NAME -->`;
people write around them. Without `[storage] url` the file is all there is: `read` is its text
and `write` replaces it. With a shared store each section's body is a row of the table
`sections` (schema `thoth_home`), keyed by the file's path relative to the project root and the
section's name, so what one host writes every host reads at once; the rest of the file stays
each host's own (people's text, shared by git, as the rest of the home). `read` is this host's
file with its sections as the store holds them (a section the file lacks is added at its end);
`write` stores the text's sections, then writes the whole text to this host's file (the copy
people and git see). `lock(path)` keeps out every other writer of the file on every host (and is
re-entrant within a thread). A store that does not answer raises at once (`errors`: the
circuit's `StoreDown`, no waiting): readers degrade, writers fail and say so.

Hosts that kept notes before the home was shared: on a host's first contact with a file's shared
sections, the lines only its file holds are added to the store's (after them, each line once), so
no host's earlier notes are hidden or overwritten; the host remembers that it joined
(`sections-joined.json` in its data folder) and never merges that file again. A forget run
elsewhere before a host's first contact cannot reach that host's file (as before sharing).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .database import Database, PostgresDatabase, storage_url
from .storage import write_atomic

if TYPE_CHECKING:
    from .runtime import Runtime

STATE_KEY = "thoth.sections"  # this runtime's HomeSections in `Runtime.plugin_state`
JOINED_FILE = "sections-joined.json"  # in a host's data folder: the files whose sections it merged into the store
SECTION = re.compile(
    r"<!-- thoth:(?P<name>[a-z][a-z0-9_-]*) -->\n?(?P<body>.*?)\n?<!-- /thoth:(?P=name) -->", re.DOTALL
)
POSTGRES = [
    """
    CREATE TABLE sections (path TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL, place INTEGER NOT NULL,
                           at DOUBLE PRECISION NOT NULL, PRIMARY KEY (path, name));
    """,
]
_LOCKS: dict[Path, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def sections_of(text: str) -> dict[str, str]:
    """The marked sections of a text: name -> body (stripped); the first of a name counts."""
    found: dict[str, str] = {}
    for match in SECTION.finditer(text):
        found.setdefault(match.group("name"), match.group("body").strip())
    return found


def marked(name: str, body: str) -> str:
    """A section as it is written in the file."""
    start, end = f"<!-- thoth:{name} -->", f"<!-- /thoth:{name} -->"
    return f"{start}\n{body}\n{end}" if body else f"{start}\n{end}"


def with_sections(text: str, bodies: dict[str, str]) -> str:
    """The text with these sections' bodies in place; a section it lacks is added at its end."""
    missing = dict(bodies)

    def swap(match: re.Match[str]) -> str:
        name = match.group("name")
        return marked(name, missing.pop(name)) if name in missing else match.group(0)

    text = SECTION.sub(swap, text)
    for name, body in missing.items():
        text = text.rstrip("\n") + ("\n\n" if text.strip() else "") + marked(name, body) + "\n"
    return text


def merged(stored: str, local: str) -> str:
    """The stored body, then each line only the local body has (once, in its order)."""
    seen = {line.strip() for line in stored.splitlines()}
    extra = []
    for line in local.splitlines():
        if line.strip() and line.strip() not in seen:
            seen.add(line.strip())
            extra.append(line)
    return "\n".join([stored, *extra] if stored else extra).strip()


def _thread_lock(path: Path) -> threading.RLock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path.resolve(), threading.RLock())


class HomeSections:
    """The marked sections of one home's files: in the files, or in the shared store (see the module doc)."""

    def __init__(self, config: Any, home: Path | None = None) -> None:
        self.root = Path(config.root)
        self.url = storage_url(config)
        self.joined_file = Path(home) / JOINED_FILE if home is not None else None  # None: remembered per process
        self._joined: set[str] | None = None
        self._db: Database | None = None
        self._opening = threading.Lock()
        self._held = threading.local()  # the store locks this thread holds (`lock` is re-entrant)

    @property
    def shared(self) -> bool:
        """Whether sections live in the shared store (`[storage] url` is set)."""
        return self.url is not None

    @property
    def db(self) -> Database:
        """The shared store's schema `thoth_home`, opened on first use (shared homes only)."""
        if self.url is None:
            raise RuntimeError("no shared store: sections live in the files")
        with self._opening:
            if self._db is None:
                self._db = PostgresDatabase(self.url, "home", POSTGRES, rows=False)
            return self._db

    @property
    def errors(self) -> tuple[type[BaseException], ...]:
        """What a read or write raises when the shared store does not answer (nothing without one)."""
        return self.db.errors if self.shared else ()

    def key(self, path: Path) -> str:
        """The file's name in the store: its path relative to the project root (absolute when outside it)."""
        path = Path(path)
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else path.as_posix()

    def read(self, path: Path) -> str:
        """The file's text with its sections as every host sees them ('' for a missing file and no sections)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            text = ""
        if not self.shared:
            return text
        self._join(path, text)
        stored = self._stored(path)
        return with_sections(text, stored) if stored else text

    def write(self, path: Path, text: str) -> None:
        """Store the text's sections (shared homes), then write the text to this host's file."""
        if self.shared:
            self._join(path, None)
            self._store(path, sections_of(text))
        write_atomic(Path(path), text)

    def _stored(self, path: Path) -> dict[str, str]:
        rows = self.db.execute("SELECT name, body FROM sections WHERE path = ? ORDER BY place", (self.key(path),))
        return {str(name): str(body) for name, body in rows.fetchall()}

    def _store(self, path: Path, bodies: dict[str, str]) -> None:
        now, key = time.time(), self.key(path)
        with self.db.transaction() as tx:
            for place, (name, body) in enumerate(bodies.items()):
                tx.execute(
                    "INSERT INTO sections (path, name, body, place, at) VALUES (?, ?, ?, ?, ?) ON CONFLICT"
                    " (path, name) DO UPDATE SET body = excluded.body, place = excluded.place, at = excluded.at",
                    (key, name, body, place, now),
                )

    def _join(self, path: Path, text: str | None) -> None:
        """This host's first contact with the file's shared sections: add the lines only its file holds."""
        key = self.key(path)
        if key in self._joined_keys():
            return
        with self.lock(path):
            if key in self._joined_keys():
                return
            if text is None:
                try:
                    text = Path(path).read_text(encoding="utf-8")
                except FileNotFoundError:
                    text = ""
            local, stored = sections_of(text), self._stored(path)
            bodies = {name: merged(stored.get(name, ""), body) for name, body in local.items()}
            changed = {name: body for name, body in bodies.items() if body != stored.get(name)}
            if changed:
                self._store(path, {**stored, **bodies})
            self._joined_keys().add(key)
            if self.joined_file is not None:
                write_atomic(self.joined_file, json.dumps(sorted(self._joined_keys()), indent=1) + "\n")

    def _joined_keys(self) -> set[str]:
        if self._joined is None:
            try:
                loaded = json.loads(self.joined_file.read_text(encoding="utf-8")) if self.joined_file else []
            except (OSError, ValueError):
                loaded = []
            self._joined = {str(k) for k in loaded} if isinstance(loaded, list) else set()
        return self._joined

    @contextmanager
    def lock(self, path: Path) -> Iterator[None]:
        """Keep out every other writer of the file: this process's threads, and on a shared home every host."""
        with _thread_lock(Path(path)):
            key = f"section:{self.key(path)}"
            held = self._held.__dict__.setdefault("keys", set())
            if not self.shared or key in held:
                yield
                return
            with self.db.lock(key):
                held.add(key)
                try:
                    yield
                finally:
                    held.discard(key)

    def scrub(self) -> None:
        """Let the store reuse the pages of rows a forget rewrote (shared homes; nothing to do for files)."""
        if self.shared:
            self.db.scrub(tables=["sections"])

    def close(self) -> None:
        """Close the shared store's connections, if they were opened."""
        with self._opening:
            if self._db is not None:
                self._db.close()
                self._db = None


def home_sections(runtime: Runtime) -> HomeSections:
    """This runtime's sections (one per runtime, closed with it)."""

    def make() -> HomeSections:
        return HomeSections(runtime.config, runtime.home)

    return runtime.plugin_state(STATE_KEY, make)  # type: ignore[no-any-return]


__all__ = ["HomeSections", "home_sections", "marked", "merged", "sections_of", "with_sections"]
