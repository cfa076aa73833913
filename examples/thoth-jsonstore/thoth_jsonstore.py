"""thoth-jsonstore: an episodic backend that keeps every episode version in one JSON file.

Small on purpose, to show what a backend must do: each call reads the file and each write replaces
it whole, so a second handle sees the first one's writes; `search` finds candidates per signal and
lets `thoth_episodic.scoring.rank` fuse them, as the built-in stores do. One process writes at a time.
"""

from __future__ import annotations

import json
import math
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from thoth_episodic.records import Episode, Hit, Query
from thoth_episodic.scoring import candidate_count, index_text, query_terms, rank

from thoth_core import hookimpl

Row = dict[str, Any]  # an episode version: `Episode.to_dict()` plus its "vector" (a list of floats, or None)


class JsonStore:
    """Implements `thoth_episodic.records.EpisodeStore` over a JSON file."""

    def __init__(self, path: Path, *, dim: int = 384) -> None:
        self.path, self.dim = Path(path), dim
        self._lock = threading.Lock()  # the background embedder calls `set_vectors` from its own thread

    # --- the file ---------------------------------------------------------------------

    def _read(self) -> list[Row]:
        if not self.path.exists():
            return []
        rows: list[Row] = json.loads(self.path.read_text())["versions"]
        return rows

    def _write(self, rows: list[Row]) -> None:
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps({"versions": rows}))
        os.replace(partial, self.path)  # a reader sees the old file or the new one, never half of one

    @contextmanager
    def _editing(self) -> Iterator[list[Row]]:
        """The file's rows to change in place, under the lock; written back when the block ends."""
        with self._lock:
            rows = self._read()
            yield rows
            self._write(rows)

    # --- writing ----------------------------------------------------------------------

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes; a changed known id supersedes its old version; a turn is stored once."""
        stored: list[Episode] = []
        now = time.time()
        with self._editing() as rows:
            for i, new in enumerate(episodes):
                kept = _first(
                    rows,
                    lambda r: (
                        _current(r)
                        and r["turn_id"] == new.turn_id != ""
                        and r["id"] != new.id
                        and (r["workspace"], r["peer"]) == (new.workspace, new.peer)
                    ),
                )
                if kept is not None:
                    if not new.replaces(_episode(kept)):
                        continue  # the turn already has its episode: a replayed write
                    new.id, new.context = kept["id"], kept["context"]  # a whole reply replaces a cut-short one
                old = _first(rows, lambda r: _current(r) and r["id"] == new.id)
                if old is not None:
                    if _episode(old).same_content(new):
                        continue
                    old["superseded_at"] = now
                    new.recorded_at = max(new.recorded_at, now)
                vector = None if vectors is None else [float(x) for x in vectors[i]]
                rows.append({**new.to_dict(), "vector": vector})
                stored.append(new)
        return stored

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the neighbour context of the current version (not a new version)."""
        with self._editing() as rows:
            for row in rows:
                if _current(row) and row["id"] == episode_id:
                    row["context"] = context

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions."""
        given = {episode_id: [float(x) for x in vector] for episode_id, vector in zip(ids, vectors, strict=True)}
        with self._editing() as rows:
            for row in rows:
                if _current(row) and row["id"] in given:
                    row["vector"] = given[row["id"]]

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Record that the nightly job absorbed these episodes."""
        wanted = set(ids)
        with self._editing() as rows:
            for row in rows:
                if row["id"] in wanted:
                    row["consolidated"] = True

    def delete(
        self, *, workspace: str, peer: str | None = None, thread: str | None = None, ids: Sequence[str] | None = None
    ) -> int:
        """Delete every version of the matching episodes, every agent's; how many episodes."""
        wanted = None if ids is None else set(ids)

        def matches(r: Row) -> bool:
            return (
                r["workspace"] == workspace
                and (peer is None or r["peer"] == peer)
                and (thread is None or r["thread"] == thread)
                and (wanted is None or r["id"] in wanted)
            )

        return self._remove(matches)

    def purge(self, before: float, *, consolidated_only: bool) -> int:
        """Delete the episodes that happened before `before` (only consolidated ones if asked); how many."""
        return self._remove(lambda r: r["occurred_at"] < before and (r["consolidated"] or not consolidated_only))

    def _remove(self, matches: Callable[[Row], bool]) -> int:
        """Delete every version of each episode one of whose versions matches; how many episodes."""
        with self._editing() as rows:
            gone = {row["id"] for row in rows if matches(row)}
            rows[:] = [row for row in rows if row["id"] not in gone]
        return len(gone)

    # --- reading ----------------------------------------------------------------------

    def get(self, episode_id: str, *, as_of: float | None = None) -> Episode | None:
        """The current (or as-of) version of one episode."""
        found = _first(self._read(), lambda r: r["id"] == episode_id and _visible(r, as_of))
        return None if found is None else _episode(found)

    def episodes(
        self,
        *,
        workspace: str | None = None,
        peer: str | None = None,
        as_of: float | None = None,
        agent: str | None = None,
    ) -> Iterator[Episode]:
        """Episodes oldest first (agent None: every agent's), as of a moment if given."""
        scope = {"workspace": workspace, "peer": peer, "agent": agent}
        rows = [r for r in self._read() if _visible(r, as_of) and _in(r, scope)]
        return iter([_episode(r) for r in sorted(rows, key=lambda r: r["occurred_at"])])

    def latest(self, *, workspace: str, peer: str, thread: str, agent: str = "default") -> Episode | None:
        """The newest current episode of an agent's thread."""
        scope = {"workspace": workspace, "peer": peer, "thread": thread, "agent": agent}
        rows = [r for r in self._read() if _current(r) and _in(r, scope)]
        return _episode(sorted(rows, key=lambda r: r["occurred_at"])[-1]) if rows else None  # the last stored on a tie

    def find_turn(self, turn_id: str) -> Episode | None:
        """The current episode written for a turn id."""
        found = _first(self._read(), lambda r: _current(r) and r["turn_id"] == turn_id)
        return None if found is None else _episode(found)

    def count(self, *, workspace: str | None = None, peer: str | None = None, agent: str | None = None) -> int:
        """How many current episodes (agent None: every agent's)."""
        scope = {"workspace": workspace, "peer": peer, "agent": agent}
        return sum(1 for r in self._read() if _current(r) and _in(r, scope))

    def expiring(self, before: float) -> list[Episode]:
        """Current, unconsolidated episodes that happened before `before`, oldest first."""
        rows = [r for r in self._read() if _current(r) and not r["consolidated"] and r["occurred_at"] < before]
        return [_episode(r) for r in sorted(rows, key=lambda r: r["occurred_at"])]

    def unembedded(self, *, limit: int, recorded_before: float | None = None) -> list[Episode]:
        """Up to `limit` current episodes without a vector, recorded strictly before a moment if given, oldest first."""
        before = math.inf if recorded_before is None else recorded_before
        rows = [r for r in self._read() if _current(r) and r["vector"] is None and r["recorded_at"] < before]
        return [_episode(r) for r in sorted(rows, key=lambda r: r["occurred_at"])[:limit]]

    def close(self) -> None:
        """Nothing to release: every call opens the file itself."""

    # --- search -----------------------------------------------------------------------

    def search(self, query: Query) -> list[Hit]:
        """Hybrid recall in the query's scope: the best candidates per signal, fused by the shared ranker."""
        scope = {"workspace": query.workspace, "peer": query.peer, "agent": query.agent}
        rows = [r for r in self._read() if _visible(r, query.as_of) and _in(r, scope)]
        if query.newest:  # only the newest episodes of the scope
            rows = sorted(rows, key=lambda r: r["occurred_at"])[-query.newest :]
        wanted = candidate_count(query.k)
        dense = _dense(rows, query.vector)[:wanted]
        lexical = _bm25(rows, query_terms(query.text))[:wanted]
        return rank(query, dense, lexical, lambda keys: {key: _episode(rows[key]) for key in keys})


def _dense(rows: list[Row], vector: np.ndarray | None) -> list[tuple[int, float, float]]:
    """(position, cosine, occurred_at) of the rows with a vector, best first."""
    keys = [i for i, r in enumerate(rows) if r["vector"] is not None]
    if vector is None or not keys:
        return []
    matrix = np.array([rows[i]["vector"] for i in keys], dtype=np.float32)
    scores = matrix @ np.asarray(vector, dtype=np.float32)
    order = np.argsort(-scores, kind="stable")
    return [(keys[j], float(scores[j]), rows[keys[j]]["occurred_at"]) for j in order]


def _bm25(rows: list[Row], terms: list[str], k1: float = 1.2, b: float = 0.75) -> list[tuple[int, float, float]]:
    """(position, BM25, occurred_at) of the rows holding any query word, best first."""
    if not terms or not rows:
        return []
    texts = [Counter(_words(index_text(_episode(r)) + "\n" + r["context"])) for r in rows]
    average = sum(sum(t.values()) for t in texts) / len(texts)
    held = {term: sum(1 for t in texts if term in t) for term in terms}
    scored = []
    for i, words in enumerate(texts):
        length, score = sum(words.values()), 0.0
        for term in terms:
            if words[term]:
                idf = math.log(1 + (len(texts) - held[term] + 0.5) / (held[term] + 0.5))
                score += idf * words[term] * (k1 + 1) / (words[term] + k1 * (1 - b + b * length / max(average, 1)))
        if score > 0:
            scored.append((i, score, rows[i]["occurred_at"]))
    return sorted(scored, key=lambda hit: -hit[1])


def _words(text: str) -> list[str]:
    """The words of a text as `query_terms` writes them (lower case, no possessive 's), repeats kept."""
    words = (w.strip("'") for w in re.findall(r"[\w']+", text.lower()))
    return [w[:-2] if w.endswith("'s") else w for w in words if w]


def _current(row: Row) -> bool:
    return row["superseded_at"] is None


def _visible(row: Row, as_of: float | None) -> bool:
    """Whether a version is current, or was as of a moment (recorded, not yet superseded, happened)."""
    if as_of is None:
        return _current(row)
    superseded = row["superseded_at"]
    return row["recorded_at"] <= as_of and (superseded is None or superseded > as_of) and row["occurred_at"] <= as_of


def _in(row: Row, scope: Mapping[str, str | None]) -> bool:
    return all(value is None or row[key] == value for key, value in scope.items())


def _first(rows: list[Row], test: Callable[[Row], Any]) -> Row | None:
    return next((r for r in rows if test(r)), None)


def _episode(row: Row) -> Episode:
    return Episode.from_dict(row)  # "vector" is not a field: from_dict ignores it


@hookimpl
def register_episodic_backends(register: Callable[..., None]) -> None:
    """Register `jsonstore`: `[plugins.episodic] backend = "jsonstore"` picks it."""
    register("jsonstore", lambda runtime, options: JsonStore(Path(runtime.home) / "episodes.json", dim=options["dim"]))
