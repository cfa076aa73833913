"""Search by meaning for any layer: the home's text embedder, vectors kept in memory, one hybrid rank.

A layer's `recall` gives `Meaning.rank` the texts it holds of a peer. Each text is scored two ways:
the cosine of its vector to the query's (the embedder named by `[thoth] embedder`, `minilm` by
default, which the episodic layer registers; `none` turns meaning off) and the Porter stems it
shares with the query. A text is a hit when its cosine reaches `FLOOR`, or half of it with a
shared stem (a name the model does not know; "run" in a long text about something else is not), and
hits are ordered by reciprocal rank fusion of the two rankings, the fusion episodic recall uses.
With no embedder (not installed, `none`, or it failed to load, said once in the log) words alone rank.

Vectors are kept in memory by a hash of the text, so a resident service (`thoth serve`) embeds each
text once; the cache holds at most `CACHE` vectors and `forget` empties it. Nothing is written to disk.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .recall import FLOOR, RRF_K
from .words import word_stems

if TYPE_CHECKING:
    from .runtime import Runtime
    from .types import MemoryRecord, RecallHit

logger = logging.getLogger(__name__)

CACHE = 20_000  # vectors kept: 384 floats each, 30 MB at most


@dataclass(frozen=True)
class Match:
    """One text that matches a query: its index in the texts given, the fused score and why it matched."""

    index: int
    score: float
    why: dict[str, Any] = field(default_factory=dict)


class Meaning:
    """The runtime's embedder, a cache of vectors by text, and `rank`."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._embedder: Any = None
        self._failed = False
        self._cache: OrderedDict[bytes, Any] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The configured embedder's name (`none`: meaning is off)."""
        return str(self.runtime.config.get("thoth.embedder") or "none")

    def embedder(self) -> Any | None:
        """The configured embedder, or None when there is none to use (said once in the log)."""
        with self._lock:  # the layers' recall hooks ask from several threads at once
            if self._embedder is None and not self._failed and self.name != "none":
                factory = self.runtime.registry("register_embedders").get(self.name)
                if factory is None:
                    self._fail(f"no plugin registers the embedder {self.name!r} ([thoth] embedder)")
                else:
                    try:
                        self._embedder = factory(self.runtime, {})
                    except Exception as exc:  # a plugin's factory: whatever it raises, recall goes on by words
                        self._fail(f"embedder {self.name!r} failed to start: {exc}")
            return self._embedder

    def _fail(self, problem: str) -> None:
        self._failed = True
        logger.warning("recall by meaning is off: %s; layers match by words alone", problem)

    def vectors(self, texts: Sequence[str]) -> Any | None:
        """The unit vectors of texts as one (n, dim) array (numpy), cached by text; None without an embedder."""
        embedder = self.embedder()
        if embedder is None:
            return None
        import numpy as np  # an embedder brings numpy: it returns numpy arrays

        keys = [hashlib.blake2b(f"{self.name}\x00{t}".encode(), digest_size=16).digest() for t in texts]
        with self._lock:
            found = {k: self._cache[k] for k in keys if k in self._cache}
            for key in found:
                self._cache.move_to_end(key)  # the least recently used go first
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            try:
                made = embedder.embed([texts[i] for i in missing])
            except Exception as exc:  # the model's files went missing, or it cannot run here
                with self._lock:
                    if not self._failed:
                        self._fail(f"embedder {self.name!r} failed: {exc}")
                    self._embedder = None
                return None
            with self._lock:
                for row, i in enumerate(missing):
                    found[keys[i]] = self._cache[keys[i]] = made[row]
                while len(self._cache) > CACHE:
                    self._cache.popitem(last=False)
        return np.stack([found[k] for k in keys]) if keys else None

    def rank(self, query: str, texts: Sequence[str], *, limit: int) -> list[Match]:
        """The texts that match the query by meaning or by words, best first, at most `limit`."""
        asked = word_stems(query)
        shared = [sorted(asked & word_stems(text)) for text in texts]
        cosines: list[float | None] = [None] * len(texts)
        vectors = self.vectors([query, *texts]) if texts else None
        if vectors is not None:
            cosines = [float(c) for c in vectors[1:] @ vectors[0]]
        kept = [i for i in range(len(texts)) if related(cosines[i], shared[i])]
        by_meaning = sorted((i for i in kept if cosines[i] is not None), key=lambda i: -(cosines[i] or 0.0))
        by_words = sorted((i for i in kept if shared[i]), key=lambda i: -len(shared[i]))
        meaning_rank = {i: r for r, i in enumerate(by_meaning, 1)}
        words_rank = {i: r for r, i in enumerate(by_words, 1)}
        matches = []
        for i in kept:
            score = sum(1 / (RRF_K + ranks[i]) for ranks in (meaning_rank, words_rank) if i in ranks)
            why: dict[str, Any] = {"dense": None if cosines[i] is None else round(cosines[i] or 0.0, 4)}
            why["words"] = shared[i]
            matches.append(Match(i, round(score, 6), why))
        matches.sort(key=lambda m: (-m.score, m.index))
        return matches[:limit]

    def rank_documents(self, query: str, documents: Sequence[str], *, limit: int) -> list[Match]:
        """Documents ranked by their best passage (`passages`), best first; `why["passage"]` is that passage."""
        owners, texts = [], []
        for index, document in enumerate(documents):
            for passage in passages(document):
                owners.append(index)
                texts.append(passage)
        best: dict[int, Match] = {}
        for match in self.rank(query, texts, limit=len(texts)):
            index = owners[match.index]
            if index not in best:
                best[index] = Match(index, match.score, dict(match.why, passage=texts[match.index]))
        return list(best.values())[:limit]

    def record_hits(self, query: str, records: Sequence[MemoryRecord], *, limit: int) -> list[RecallHit]:
        """A layer's records that match the query as recall hits, each shown by its best passage."""
        return [
            {
                "layer": records[m.index]["layer"],
                "kind": records[m.index]["kind"],
                "id": records[m.index]["id"],
                "text": m.why["passage"],
                "score": m.score,
                "why": {k: v for k, v in m.why.items() if k != "passage"},
                "at": records[m.index]["at"],
            }
            for m in self.rank_documents(query, [r["text"] for r in records], limit=limit)
        ]

    def __len__(self) -> int:
        """How many vectors are cached."""
        return len(self._cache)

    def clear(self) -> None:
        """Drop every cached vector (after a forget)."""
        with self._lock:
            self._cache.clear()


def related(cosine: float | None, shared: list[str]) -> bool:
    """Whether a text matches: by meaning (cosine at least FLOOR), or by a word whose sense the cosine does not deny."""
    if cosine is None:
        return bool(shared)
    return cosine >= FLOOR or (bool(shared) and cosine >= FLOOR / 2)


def passages(text: str) -> list[str]:
    """A document's paragraphs as lines, each heading joined to the paragraph under it; no front matter or comments."""
    body = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.DOTALL)
    body = re.sub(r"<!--.*?-->", "", body, flags=re.DOTALL)
    found, heading = [], ""
    for raw in re.split(r"\n\s*\n", body):
        lines = raw.strip().splitlines()
        while lines and lines[0].startswith("#"):  # a heading: it names the paragraph under it
            heading = f"{heading} {lines.pop(0).lstrip('#').strip()}".strip()
        paragraph = " ".join(" ".join(lines).split())
        if paragraph:
            found.append(f"{heading}: {paragraph}" if heading else paragraph)
            heading = ""
    return found + ([heading] if heading else [])


__all__ = ["CACHE", "FLOOR", "Match", "Meaning", "passages", "related"]
