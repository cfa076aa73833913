"""Embeddings computed behind the write path: stored episodes get their vectors in batches.

`EpisodicMemory.write` stores an episode without a vector (BM25 finds it at once) and puts
its embedding text here; one background thread embeds whatever is waiting (up to `BATCH` texts
in one embedder call, which embeds them one by one by default, see `embedder.py`) and stores the
vectors in one write, so the write path only pays for the SQLite insert. Episodes stored
without a vector by an earlier process (killed before its queue drained, or without an
embedder) are picked up by `backfill`, from the store itself.
Bulk writes (import, bundle import, reindex) go through `pipelined`: the next batch is
embedded while the current one is committed, so they run at the embedding model's pace.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from itertools import islice
from typing import TYPE_CHECKING, TypeVar

from thoth_core.database import StoreDown

from .scoring import embed_text

if TYPE_CHECKING:
    import numpy as np

    from .records import EpisodeStore

logger = logging.getLogger(__name__)

BATCH = 32
# The store cannot be reached, opened or written now (the shared server is down, the data folder is read-only or
# full, the file is locked): nothing is wrong with the episodes, which the next start embeds.
STORE_DOWN = (StoreDown, sqlite3.OperationalError, OSError)
Chunk = TypeVar("Chunk")
Item = TypeVar("Item")
Vectors = TypeVar("Vectors")


def batches(items: Iterable[Item], size: int) -> Iterable[list[Item]]:
    """Consecutive lists of `size` items (the last one shorter), read lazily."""
    remaining = iter(items)
    while chunk := list(islice(remaining, size)):
        yield chunk


def pipelined(
    chunks: Iterable[Chunk], embed: Callable[[Chunk], Vectors], store: Callable[[Chunk, Vectors], int]
) -> int:
    """Store every chunk with its vectors, embedding the next chunk (in a thread) while this one is stored.

    Chunks are stored in order, each by one `store` call (one transaction); returns the sum of what
    `store` returned. An exception from `embed` or `store` stops the pipeline and is raised here.
    """
    total = 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="episodic-bulk-embed") as worker:
        pending: tuple[Chunk, Future[Vectors]] | None = None
        try:
            for chunk in chunks:
                following = (chunk, worker.submit(embed, chunk))
                if pending is not None:
                    total += store(pending[0], pending[1].result())
                pending = following
            if pending is not None:
                total += store(pending[0], pending[1].result())
        except BaseException:
            if pending is not None:
                pending[1].cancel()
            raise
    return total


class EmbeddingQueue:
    """Episode ids waiting for a vector, and the thread that embeds them in batches."""

    def __init__(self, store: Callable[[], EpisodeStore], embed: Callable[[Sequence[str]], np.ndarray | None]) -> None:
        self._store, self._embed = store, embed
        self._waiting: dict[str, str] = {}  # episode id -> text to embed, oldest first
        self._scan = False
        self._busy = False
        self._closed = False
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._started = time.time()  # the backfill leaves later writes to the process that made them
        self.backfilled = 0  # stored episodes embedded by `backfill` so far
        self.unavailable = False  # the embedder returned nothing: the queue stopped

    def put(self, episode_id: str, text: str) -> None:
        """Embed this episode's text soon."""
        with self._changed:
            self._waiting[episode_id] = text
            self._wake()

    def drop(self, gone: Callable[[str], bool]) -> int:
        """Let go of the queued texts of episodes that `gone` says were deleted (forget); returns how many."""
        with self._changed:
            waiting = list(self._waiting)
        doomed = [episode_id for episode_id in waiting if gone(episode_id)]
        with self._changed:
            for episode_id in doomed:
                self._waiting.pop(episode_id, None)
        return len(doomed)

    def backfill(self) -> None:
        """Also embed every stored current episode that has no vector yet."""
        with self._changed:
            self._scan = True
            self._wake()

    def _wake(self) -> None:
        if self._closed:
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="episodic-embed", daemon=True)
            self._thread.start()
        self._changed.notify_all()

    def join(self, timeout: float | None = None, *, backfill: bool = True) -> bool:
        """Wait until every queued episode (and the backfill, if asked) has its vector.

        False when the timeout came first, or the queue stopped (closed, or no embedder) with work left.
        """
        done = self._idle if backfill else lambda: not self._waiting
        with self._changed:
            self._changed.wait_for(lambda: done() or self._closed, timeout)
            return done() and not self.unavailable

    def _idle(self) -> bool:
        return not self._waiting and not self._scan and not self._busy

    def close(self, timeout: float = 30.0) -> None:
        """Embed what this process wrote (the backfill can wait for the next start), then stop."""
        with self._changed:
            self._scan = False
            finished = self._changed.wait_for(lambda: self._idle() or self._thread is None or self._closed, timeout)
            left = len(self._waiting)
            self._closed = True
            self._changed.notify_all()
        if not finished:
            logger.warning("episodic: %d episodes still wait for a vector; they are embedded at the next start", left)

    def _run(self) -> None:
        failed: set[str] = set()
        while (work := self._next()) is not None:
            batch, scan, waiting = work
            scan_over = False  # a finished or failing scan is tried again at the next start
            try:
                if scan:
                    found = self._missing(BATCH - len(batch), failed | waiting)
                    self._count_backfill(len(found))
                    batch |= found
                    scan_over = not found
                if batch and not self._store_vectors(batch):
                    return
            except Exception as exc:  # noqa: BLE001 - a failing embedder or store must not kill the thread silently
                if isinstance(exc, STORE_DOWN):  # an outage or a read-only folder is one line, no traceback
                    logger.warning(
                        "episodic: %s wait for a vector (they are embedded at the next start): %s: %s",
                        f"{len(batch)} episodes" if batch else "stored episodes",
                        type(exc).__name__,
                        exc,
                    )
                else:
                    logger.error(  # one line; the traceback with debug logging (-vv)
                        "episodic: embedding %d episodes failed (%s: %s); they stay BM25-only for now",
                        len(batch),
                        type(exc).__name__,
                        exc,
                        exc_info=exc if logger.isEnabledFor(logging.DEBUG) else None,
                    )
                failed |= batch.keys()
                scan_over = scan
            with self._changed:
                self._scan = self._scan and not scan_over
                for episode_id, text in batch.items():
                    if self._waiting.get(episode_id) == text:  # not put again meanwhile
                        del self._waiting[episode_id]

    def _next(self) -> tuple[dict[str, str], bool, set[str]] | None:
        """Wait for work: (queued texts, at most a batch; whether to add stored ones; every queued id).

        None once closed.
        """
        with self._changed:
            self._busy = False
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._waiting or self._scan or self._closed)
            if self._closed:
                return None
            self._busy = True
            batch = dict(list(self._waiting.items())[:BATCH])
            return batch, self._scan and len(batch) < BATCH, set(self._waiting)

    def _count_backfill(self, found: int) -> None:
        if found and not self.backfilled:
            logger.info("episodic: embedding stored episodes that have no vector yet, in the background")
        elif not found and self.backfilled:
            logger.info("episodic: embedded %d stored episodes that had no vector", self.backfilled)
        self.backfilled += found

    def _missing(self, limit: int, skip: set[str]) -> dict[str, str]:
        """Stored current episodes without a vector, except those to skip, with the text a turn's write embeds."""
        stored = self._store().unembedded(limit=limit + len(skip), recorded_before=self._started)
        found = [e for e in stored if e.id not in skip]
        return {e.id: embed_text(e) for e in found[:limit]}

    def _store_vectors(self, batch: dict[str, str]) -> bool:
        """Embed and store one batch; False (and stop) when there is no embedder."""
        vectors = self._embed(list(batch.values()))
        if vectors is None:
            with self._changed:
                self._waiting.clear()
                self._scan, self._busy, self._closed, self.unavailable = False, False, True, True
                self._changed.notify_all()
            return False
        self._store().set_vectors(list(batch), vectors)
        return True
