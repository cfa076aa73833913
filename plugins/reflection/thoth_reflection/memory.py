"""The persona's memory file (`persona/MEMORY.md`): a bounded snapshot plus recent notes.

Reflection owns two marked sections and leaves the rest of the file alone: the snapshot
(rewritten by the nightly job, never larger than its token budget) and the recent notes
(appended at session end, folded into the snapshot each night). Writes are atomic and
serialised per file.

With `[storage] url` set, both sections live in the shared store (`thoth_core.sections`): every
host's working layer shows what any host wrote, and this host's file is a copy. Without it the
file is all there is.

Every line written from a session or an episode ends with its owner's tag,
`<!-- peer:alice ws:default -->`; the working layer shows a line only to that peer in that
workspace (untagged lines, e.g. ones a person wrote, show to everyone) and `forget` deletes them.
"""

from __future__ import annotations

import re
import threading
from contextlib import AbstractContextManager
from pathlib import Path

from thoth_core.owners import Owner, split_owner, tagged
from thoth_core.sections import HomeSections
from thoth_core.storage import write_atomic

SECTIONS = {"snapshot": "Snapshot", "notes": "Recent notes"}
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()
NOTE_LINE = re.compile(r"^- \[(?P<day>\d{4}-\d{2}-\d{2})\] (?P<text>.*)$")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- thoth:{name} -->", f"<!-- /thoth:{name} -->"


def _lock(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path.resolve(), threading.Lock())


class MemoryFile:
    """Reflection's sections of the persona memory file (`sections`: kept where the home keeps them, e.g. shared)."""

    def __init__(self, path: Path, sections: HomeSections | None = None) -> None:
        self.path = path
        self.sections = sections

    def text(self) -> str:
        """The whole file ('' when missing), its sections as every host sees them."""
        if self.sections is not None:
            return self.sections.read(self.path)
        return self.path.read_text(encoding="utf-8") if self.path.exists() else ""

    def _locked(self) -> AbstractContextManager[object]:
        """No other writer of the file meanwhile: this process's threads (and every host, when shared)."""
        return self.sections.lock(self.path) if self.sections is not None else _lock(self.path)

    def section(self, name: str) -> str:
        """The body of one of reflection's sections ('' when absent)."""
        start, end = _markers(name)
        match = re.search(re.escape(start) + r"\n?(.*?)\n?" + re.escape(end), self.text(), re.DOTALL)
        return match.group(1).strip() if match else ""

    def replace_section(self, name: str, body: str) -> bool:
        """Set one section's body; returns whether the file changed."""
        with self._locked():
            return self._write(self._with_section(self.text(), name, body.strip()))

    def notes(self) -> list[tuple[str, str]]:
        """The recent notes as (day, text)."""
        return [
            (m.group("day"), m.group("text"))
            for line in self.section("notes").splitlines()
            if (m := NOTE_LINE.match(line.strip()))
        ]

    def append_notes(self, notes: list[str], *, day: str, owner: Owner | None = None) -> list[str]:
        """Append notes not already in the file, tagged with their owner; returns those appended."""
        with self._locked():
            text = self.text()
            current = self._section_of(text, "notes")
            present = {line.strip() for line in (current + "\n" + self._section_of(text, "snapshot")).splitlines()}
            added = []
            lines = current.splitlines() if current else []
            for note in notes:
                body = tagged(" ".join(note.split()), owner)
                line = f"- [{day}] {body}"
                if line in present or any(p.endswith("] " + body) for p in present):
                    continue
                lines.append(line)
                present.add(line)
                added.append(note)
            if added:
                self._write(self._with_section(text, "notes", "\n".join(lines)))
            return added

    def drop_notes(self, consumed: list[tuple[str, str]]) -> None:
        """Remove notes that were folded into the snapshot."""
        with self._locked():
            text = self.text()
            gone = {f"- [{day}] {note}" for day, note in consumed}
            kept = [
                line
                for line in self._section_of(text, "notes").splitlines()
                if line.strip() and line.strip() not in gone
            ]
            self._write(self._with_section(text, "notes", "\n".join(kept)))

    def forget(self, owner: Owner) -> int:
        """Delete every line tagged with this owner, anywhere in the file; returns how many."""
        with self._locked():
            lines = self.text().splitlines(keepends=True)
            kept = [line for line in lines if split_owner(line.rstrip("\n"))[1] != owner]
            if len(kept) < len(lines):
                self._write("".join(kept))
            return len(lines) - len(kept)

    def _section_of(self, text: str, name: str) -> str:
        start, end = _markers(name)
        match = re.search(re.escape(start) + r"\n?(.*?)\n?" + re.escape(end), text, re.DOTALL)
        return match.group(1).strip() if match else ""

    def _with_section(self, text: str, name: str, body: str) -> str:
        text = _with_sections(text)
        start, end = _markers(name)
        block = f"{start}\n{body}\n{end}" if body else f"{start}\n{end}"
        return re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _m: block, text, count=1, flags=re.DOTALL)

    def _write(self, text: str) -> bool:
        if text == self.text():
            return False
        if self.sections is not None:
            self.sections.write(self.path, text)
        else:
            write_atomic(self.path, text)
        return True


def _with_sections(text: str) -> str:
    """The file text with both of reflection's sections present (empty ones added at the end)."""
    if not text.strip():
        text = "# Memory\n\nWhat this agent remembers. Reflection keeps the marked sections; edit around them freely.\n"
    for name, title in SECTIONS.items():
        start, end = _markers(name)
        if start not in text:
            text = text.rstrip("\n") + f"\n\n## {title}\n\n{start}\n{end}\n"
    return text


def append_knowledge(directory: Path, topic: str, text: str, *, heading: str) -> Path:
    """Append a promoted note to `knowledge/<topic>.md` unless it is there; returns the file."""
    path = directory / f"{topic}.md"
    with _lock(path):
        current = path.read_text(encoding="utf-8") if path.exists() else f"# {topic.replace('-', ' ').title()}\n"
        if not re.search(rf"\n\n{re.escape(text.strip())}\n(?=\n## |\Z)", current):  # a whole note: not twice
            write_atomic(path, current.rstrip("\n") + f"\n\n## {heading}\n\n{text.strip()}\n")
    return path
