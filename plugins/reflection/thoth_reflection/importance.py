"""Importance of memory snapshot lines: which survive the nightly cut to `snapshot_tokens`, and where the rest go.

A line's score is its kind's weight (a line a person wrote into the snapshot or approved, weighed so
that even years old it outranks a fresh note > a note > an absorbed session or episode), times how
often it was confirmed (near-duplicates of one owner merge and add up their counts), halved when a
later line of the same owner supersedes it, times recency (half of the score fades with a 30-day
half-life, so an old important line still beats a new unimportant one).
Kinds and counts survive between nights in `snapshot-weights.json` (keys are hashes, never text; a
row of the shared store's `documents` when there is one, see `documents`);
a snapshot line it does not know is untagged (a person wrote it: `stated`) or a note. Lines cut for
the budget, or merged away by the model, are appended with their owner tags to `snapshot-archive.md`
(which `forget` cleans like MEMORY.md), so nothing leaves the snapshot unseen. Lines a person wrote or
approved (`PERSON`) keep their words; an approved line is never cut either: it stays until a person removes it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from thoth_core import count_tokens
from thoth_core.owners import Owner, split_owner, tagged

if TYPE_CHECKING:
    from .documents import Documents

KIND_WEIGHT = {"stated": 5.0, "approved": 5.0, "note": 2.0, "session": 1.0, "episode": 1.0}
PERSON = frozenset({"stated", "approved"})  # lines a person wrote or approved: never reworded or merged away
DUPLICATE = 0.8  # word overlap (Jaccard) at which two lines of one owner say the same thing
SUPERSEDED = 0.5  # ... at which a later line replaces an earlier one (same subject, changed detail)
SUPERSEDED_FACTOR = 0.5
HALF_LIFE_DAYS = 30.0
WEIGHTS_FILE = "snapshot-weights.json"
ARCHIVE_FILE = "snapshot-archive.md"
LINE = re.compile(r"^- \[(?P<day>\d{4}-\d{2}-\d{2})\] (?P<text>.*)$")
WORD = re.compile(r"[a-z0-9]+")
POSSESSIVE = re.compile(r"['’]s\b")
STOPWORDS = frozenset(
    "a an and are as at be by for from has have in is it its of on or that the this to was were will with".split()
)


@dataclass(frozen=True)
class Entry:
    """One snapshot line with what its importance is made of."""

    day: str
    text: str
    owner: Owner | None
    kind: str = "note"
    seen: int = 1
    superseded: bool = False

    @property
    def line(self) -> str:
        """The snapshot line, owner tag last."""
        return tagged(f"- [{self.day}] {self.text}", self.owner)

    @property
    def key(self) -> str:
        """The hash naming this fact in the weights file (owner and words, not the day)."""
        owner = "|".join(self.owner) if self.owner else ""
        return hashlib.sha256(f"{owner}\n{normal(self.text)}".encode()).hexdigest()[:24]

    def score(self, today: str) -> float:
        """How much this line deserves a place in the snapshot."""
        now, then = _date(today), _date(self.day)
        age = max(0.0, (now - then).days) if now and then else HALF_LIFE_DAYS  # an undated line counts as half-aged
        recency = 0.5 ** (age / HALF_LIFE_DAYS)
        factor = SUPERSEDED_FACTOR if self.superseded else 1.0
        return KIND_WEIGHT.get(self.kind, 1.0) * (1.0 + math.log2(self.seen)) * factor * (0.5 + 0.5 * recency)


def _date(day: str) -> datetime | None:
    try:
        return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        return None


def normal(text: str) -> str:
    """Text compared case- and space-insensitively."""
    return " ".join(text.lower().split())


def words(text: str) -> frozenset[str]:
    """The content words of a line."""
    return frozenset(w for w in WORD.findall(POSSESSIVE.sub("", text.lower())) if w not in STOPWORDS)


def similarity(a: str, b: str) -> float:
    """Word overlap of two lines (Jaccard, 0..1)."""
    left, right = words(a), words(b)
    return len(left & right) / len(left | right) if left and right else float(normal(a) == normal(b))


def same_fact(a: str, b: str) -> bool:
    """Whether two lines say the same thing: nearly the same words, or one's words (three or more) all in the other."""
    left, right = words(a), words(b)
    if similarity(a, b) >= DUPLICATE:
        return True
    return min(len(left), len(right)) >= 3 and (left <= right or right <= left)


def parse(line: str) -> tuple[str, str, Owner | None] | None:
    """(day, text, owner) of a snapshot line; None for a line that is not a dated bullet."""
    body, owner = split_owner(line.strip())
    match = LINE.match(body.strip())
    return (match.group("day"), match.group("text").strip(), owner) if match else None


class Weights:
    """Kinds and confirmation counts of snapshot lines, kept between nights."""

    def __init__(self, docs: Documents) -> None:
        self.docs = docs
        self.known: dict[str, dict[str, object]] = {}
        try:
            text = docs.read(WEIGHTS_FILE)
            loaded = json.loads(text) if text is not None else {}
        except (OSError, ValueError) as exc:
            where = docs.where(WEIGHTS_FILE)
            raise ValueError(f"{where}: unreadable snapshot weights ({exc}); delete it to start afresh") from exc
        self.known = loaded if isinstance(loaded, dict) else {}

    def entry(self, line: str) -> Entry | None:
        """A snapshot line as an entry: known kind and count, else `stated` when untagged, else `note`."""
        parsed = parse(line)
        if parsed is None:
            return None
        day, text, owner = parsed
        entry = Entry(day, text, owner, kind="stated" if owner is None else "note")
        meta = self.known.get(entry.key)
        if isinstance(meta, dict):
            kind = meta.get("kind")
            seen = meta.get("seen")
            entry = replace(
                entry,
                kind=kind if isinstance(kind, str) and kind in KIND_WEIGHT else entry.kind,
                seen=seen if isinstance(seen, int) and seen > 0 else 1,
            )
        return entry

    def save(self, kept: list[Entry]) -> None:
        """Remember the kept lines' weights (and forget every other)."""
        self.known = {e.key: {"kind": e.kind, "seen": e.seen} for e in kept}
        self.docs.write(WEIGHTS_FILE, json.dumps(self.known, indent=1, sort_keys=True) + "\n")


def merge(entries: list[Entry]) -> list[Entry]:
    """Near-duplicates of one owner merged into the latest wording (a person's, when one is), their counts added;
    then later lines that change an earlier one's detail mark it superseded. Order (oldest first) is kept."""
    merged: list[Entry] = []
    for entry in entries:
        match = next(
            (
                i
                for i in range(len(merged) - 1, -1, -1)
                if merged[i].owner == entry.owner and same_fact(merged[i].text, entry.text)
            ),
            None,
        )
        if match is None:
            merged.append(entry)
            continue
        if merged[match].kind in PERSON and entry.kind in PERSON:  # two lines a person gave: both stay
            merged.append(entry)
            continue
        old = merged.pop(match)
        rank = max((old, entry), key=lambda e: KIND_WEIGHT.get(e.kind, 1.0))
        wording = old if old.kind in PERSON else entry  # a person's words are never replaced by a later wording
        merged.append(replace(wording, kind=rank.kind, seen=old.seen + entry.seen, day=max(old.day, entry.day)))
    return [
        replace(
            entry,
            superseded=any(
                later.owner == entry.owner
                and later.day >= entry.day
                and similarity(later.text, entry.text) >= SUPERSEDED
                for later in merged[index + 1 :]
            ),
        )
        for index, entry in enumerate(merged)
    ]


def cut(entries: list[Entry], budget: int, today: str) -> tuple[list[Entry], list[Entry]]:
    """(kept, cut): every approved line, then the most important others whose tokens fit the budget (kept in day
    order), and the rest."""
    order = sorted(range(len(entries)), key=lambda i: (entries[i].score(today), entries[i].day, i), reverse=True)
    chosen = {i for i, entry in enumerate(entries) if entry.kind == "approved"}
    used = sum(count_tokens(entries[i].line) for i in chosen)
    for index in (i for i in order if i not in chosen):  # line breaks cost no tokens: the lines' costs add up exactly
        cost = count_tokens(entries[index].line)
        if used + cost <= budget:
            chosen.add(index)
            used += cost
    kept = sorted((entries[i] for i in sorted(chosen)), key=lambda e: e.day)
    return kept, [entries[i] for i in range(len(entries)) if i not in chosen]


def render(entries: list[Entry]) -> str:
    """The snapshot section's body."""
    return "\n".join(e.line for e in entries)


def archive(docs: Documents, *, day: str, how: str, budget: int, gone: list[tuple[Entry, str]]) -> None:
    """Append the lines that left the snapshot (each with why) to the archive, owner tags kept."""
    if not gone:
        return
    heading = f"## {day} nightly ({how}): {len(gone)} line(s) left the {budget}-token snapshot"
    lines = [tagged(f"- [{e.day}] {e.text} ({why}; {e.kind}, seen {e.seen}×)", e.owner) for e, why in gone]

    def appended(current: str | None) -> str:
        current = current or "# Snapshot archive\n\nLines nightly consolidation removed from the memory snapshot.\n"
        return current.rstrip("\n") + f"\n\n{heading}\n\n" + "\n".join(lines) + "\n"

    docs.update(ARCHIVE_FILE, appended)
