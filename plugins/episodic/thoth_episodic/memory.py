"""The episodic layer of one runtime: settings, the chosen backend and embedder, write and recall.

`memory_for(runtime)` gives the runtime's `EpisodicMemory` (made once, kept in
`runtime.plugin_state`). Backends and embedders come from the `register_episodic_backends`
and `register_embedders` hooks, so a third-party one is a pip install plus
`[plugins.episodic] backend = "NAME"`. A written episode is stored at once and embedded
in the background (`embedding_queue`). When the embedder cannot load, episodes are stored
without vectors and recall runs on BM25 alone (logged once, with how to fix it); they are
embedded at the next start that has one.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from thoth_core.database import storage_url
from thoth_core.errors import PluginError, ThothError

from .embedder import Embedder, EmbedderUnavailable
from .embedding_queue import EmbeddingQueue, batches, pipelined
from .explain import LINE_WIDTH, explain_line
from .records import Episode, EpisodeStore, Hit, Query
from .scoring import DAY, FUSIONS, embed_text, previous_turn
from .signals import Signals

if TYPE_CHECKING:
    import numpy as np

    from thoth_core import Runtime
    from thoth_core.types import Reply, Session, Turn

logger = logging.getLogger(__name__)

NAME = "episodic"
CONTEXT_CHARS = 300
WARM_UP_SECONDS = 30.0  # how long closing waits for the embedder to finish loading
LIMIT = 10_000_000  # no count of episodes or rows is this large but by mistake
# Keys the built-in backends read from the same table (`sqlite`: the first five; `postgres`: dsn and the ann
# keys, with its own defaults when they are not set: postgres_ann.py); None: no default.
STORE_OPTIONS: dict[str, Any] = {
    "path": "episodic/episodes.db",
    "synchronous": "NORMAL",
    "ann": "auto",
    "ann_min_rows": 20_000,
    "ann_expansion": 256,  # the HNSW search beam: ann_index.py says why
    "dsn": None,
}
LOADING_MARGIN = 0.5  # seconds of the layer's deadline left for BM25 when the embedder is still loading at start
QUEUED_WAIT = 0.5  # seconds a recall waits for queued episodes' vectors before it searches without them
STARTED_WAIT = 2.0  # seconds the warm-up waits for the other `session_start` hooks when the layer has no deadline


@dataclass
class Settings:
    """`[plugins.episodic]`, validated."""

    backend: str = "sqlite"
    embedder: str = "minilm"
    tau_days: float = 14.0
    recency_weight: float = 0.3
    prefilter_newest: int = 0
    fusion: str = "bm25-first"
    related_k: int = 3
    related_every_turn: bool = False
    retention_days: float = 0.0
    neighbour_weight: float = 0.3  # post-fusion signals (signals.py): the weights all 3 leave-one-
    neighbour_seconds: float = 600.0  # conversation-out folds on LoCoMo dev chose (bench/signals_cv.py)
    temporal_weight: float = 2.0
    entity_weight: float = 0.0
    speaker_weight: float = 0.75

    @classmethod
    def from_config(cls, runtime: Runtime) -> Settings:
        """Read and check the table; a bad value raises ConfigError naming the key."""
        table = runtime.config.plugin(NAME)
        settings = cls()
        numbers = [("tau_days", 36_500), ("recency_weight", 1), ("retention_days", 36_500), ("neighbour_seconds", DAY)]
        numbers += [("neighbour_weight", 10), ("temporal_weight", 10), ("entity_weight", 10), ("speaker_weight", 10)]
        for key, high in numbers:
            if key in table:
                setattr(settings, key, runtime.config.number(f"plugins.{NAME}.{key}", table[key], high=high))
        for key in ("prefilter_newest", "related_k"):
            if key in table:
                setattr(settings, key, runtime.config.integer(f"plugins.{NAME}.{key}", table[key], high=LIMIT))
        if not isinstance(table.get("related_every_turn", False), bool):
            got = table["related_every_turn"]
            raise runtime.config.error(f"plugins.{NAME}.related_every_turn", f"expected true or false, got {got!r}")
        settings.related_every_turn = table.get("related_every_turn", False)
        for key in ("backend", "embedder"):
            if key in table and not isinstance(table[key], str):
                raise runtime.config.error(f"plugins.{NAME}.{key}", f"expected a name, got {table[key]!r}")
            setattr(settings, key, table.get(key, getattr(settings, key)))
        if "backend" not in table and storage_url(runtime.config):  # `[storage] url`: the shared store by default
            settings.backend = "postgres"
        if table.get("fusion", settings.fusion) not in FUSIONS:
            names = " or ".join(f'"{name}"' for name in FUSIONS)
            raise runtime.config.error(f"plugins.{NAME}.fusion", f"expected {names}, got {table['fusion']!r}")
        settings.fusion = table.get("fusion", settings.fusion)
        return settings

    @property
    def signals(self) -> Signals:
        """The post-fusion signal weights (`signals.Signals`)."""
        return Signals(
            self.neighbour_weight, self.neighbour_seconds, self.temporal_weight, self.entity_weight, self.speaker_weight
        )


def summarize(user: str, reply: str, limit: int = 200) -> str:
    """A short extractive summary: the first sentence of each side."""

    def first(text: str) -> str:
        text = " ".join(text.split())
        match = re.match(r"(.+?[.!?])(\s|$)", text)
        return (match.group(1) if match else text)[: limit // 2]

    parts = [p for p in (first(user), first(reply)) if p]
    return " / ".join(parts)


class EpisodicMemory:
    """Write and recall episodes for one runtime."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = Settings.from_config(runtime)
        self.options = runtime.config.plugin(NAME)
        self._store: EpisodeStore | None = None
        self._embedder: Embedder | None = None
        self._embedder_failed = False
        self._warming = False
        self._warm_up: threading.Thread | None = None
        self._lock = threading.RLock()
        self.last_retire = 0.0
        self.queue = EmbeddingQueue(lambda: self.store, self.embed)
        self._backfilled = False

    @property
    def store(self) -> EpisodeStore:
        """The configured backend, opened on first use (options get the embedder's `dim`)."""
        with self._lock:
            if self._store is None:
                backends = self.runtime.registry("register_episodic_backends")
                if self.settings.backend not in backends:
                    raise self.runtime.config.error(
                        f"plugins.{NAME}.backend",
                        f"unknown episodic backend {self.settings.backend!r}; installed: {', '.join(sorted(backends))}",
                    )
                embedder = self.embedder
                dim = embedder.dim if embedder is not None else 384
                try:
                    self._store = backends[self.settings.backend](self.runtime, {**self.options, "dim": dim})
                except ThothError:
                    raise
                except Exception as exc:
                    raise self.backend_error(f"failed to open: {type(exc).__name__}: {exc}") from exc
            return self._store

    def backend_error(self, problem: str) -> PluginError:
        """One line naming the configured backend, the plugin that registered it and what went wrong."""
        backend = self.settings.backend
        owner = self.runtime.registrant("register_episodic_backends", backend) or NAME
        return PluginError(owner, " ".join(f"episodic backend {backend!r} {problem}".split()))

    @property
    def embedder(self) -> Embedder | None:
        """The configured embedder, or None when it cannot be used (BM25 only)."""
        with self._lock:
            if self._embedder is None and not self._embedder_failed:
                embedders = self.runtime.registry("register_embedders")
                if self.settings.embedder not in embedders:
                    raise self.runtime.config.error(
                        f"plugins.{NAME}.embedder",
                        f"unknown embedder {self.settings.embedder!r}; installed: {', '.join(sorted(embedders))}",
                    )
                self._embedder = embedders[self.settings.embedder](self.runtime, self.options)
            return self._embedder

    @property
    def embedder_name(self) -> str:
        """The embedder in use, or `bm25-only`."""
        return "bm25-only" if self._embedder_failed else self.settings.embedder

    def embed(self, texts: Sequence[str]) -> np.ndarray | None:
        """Vectors for texts, or None (logged once) when the embedder is unavailable."""
        embedder = self.embedder
        if embedder is None or not texts:
            return None
        try:
            return embedder.embed(list(texts))
        except EmbedderUnavailable as exc:
            with self._lock:
                if not self._embedder_failed:
                    logger.warning("%s; episodic recall uses BM25 alone until it is installed", exc)
                self._embedder_failed, self._embedder = True, None
            return None

    def warm_up(self, session: Session | None = None) -> None:
        """Load the embedder on a background thread, so the first recall does not wait for the model.

        Given a starting session, the thread first waits for every `session_start` hook (the working
        layer restores the history), then loads the model only when the session's next turn recalls.
        """
        with self._lock:
            if self._warming or self._embedder_failed:
                return
            self._warming = True
        self._warm_up = threading.Thread(target=self._warm, args=(session,), name="episodic-warm-up", daemon=True)
        self._warm_up.start()

    def _warm(self, session: Session | None) -> None:
        if session is not None:
            session.started.wait(self.runtime.deadline_for(NAME) or STARTED_WAIT)
            if not self.recalls(session):
                with self._lock:
                    self._warming = False  # a later `warm_up` starts the model
                return
        self._backfill()
        self.embed(["warm up"])

    def recalls(self, session: Session) -> bool:
        """Whether the session's next turn recalls: on a thread's first turn, or on every turn."""
        return bool(self.settings.related_k) and (self.settings.related_every_turn or session.is_new_thread)

    def _backfill(self) -> None:
        """Once per process: embed the stored episodes an earlier one left without a vector."""
        if not self._backfilled and not self._embedder_failed:
            self._backfilled = True
            self.queue.backfill()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every written episode has its vector (and the warm-up); False when the timeout came first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if self._warm_up is not None:
            self._warm_up.join(timeout)
        return self.queue.join(None if deadline is None else max(0.0, deadline - time.monotonic()))

    # --- writing ----------------------------------------------------------------------

    def episode_of(self, turn: Turn, reply: Reply, session: Session) -> Episode:
        """The episode a finished turn becomes."""
        return Episode(
            workspace=session.workspace,
            peer=turn.peer,
            thread=turn.thread,
            user=turn.text,
            assistant=reply.text,
            summary=summarize(turn.text, reply.text),
            session_id=session.id,
            turn_id=turn.id,
            occurred_at=turn.created_at,
            cost_usd=reply.usage.cost_usd,
            model=reply.model,
            agent=session.agent,
        )

    def write(self, episode: Episode) -> Episode:
        """Store one episode, link it with its thread's previous one, and queue its embedding.

        Idempotent by turn id: when the turn already has its episode (a post-turn write replayed
        after a crash), nothing is stored, linked or embedded, and the stored episode is returned.
        A whole reply replacing the turn's cut-short episode takes its id and links (the store
        decides, `Episode.replaces`) and is embedded anew.
        """
        made = episode.id
        previous = self.store.latest(
            workspace=episode.workspace, peer=episode.peer, thread=episode.thread, agent=episode.agent
        )
        if previous is not None:
            episode.context = _clip(previous.user + " " + previous.assistant)
        if not self.store.add([episode]):
            return (self.store.find_turn(episode.turn_id) if episode.turn_id else None) or episode
        if not self._embedder_failed:
            self.queue.put(episode.id, embed_text(episode))
            self._backfill()
        if previous is not None and episode.id == made:  # a replaced episode's neighbours already know it
            self.store.set_context(previous.id, neighbours(previous.context, episode.user))
        return episode

    def write_many(
        self, episodes: Iterable[Episode], progress: Callable[[int], None] | None = None, batch: int = 256
    ) -> int:
        """Store many episodes (import) in batches, one transaction each; returns how many were new or changed.

        The next batch is embedded while this one is committed (`embedding_queue.pipelined`).
        """

        def add(chunk: list[Episode], vectors: np.ndarray | None) -> int:
            stored = len(self.store.add(chunk, vectors))
            if progress:
                progress(len(chunk))
            return stored

        def embed(chunk: list[Episode]) -> np.ndarray | None:
            return self.embed([embed_text(e) for e in chunk]) if chunk else None

        def new() -> Iterator[Episode]:  # a re-import embeds nothing the store already holds
            for episode in episodes:
                if not self._held(episode):
                    yield episode
                elif progress:
                    progress(1)

        return pipelined(batches(new(), batch), embed, add)

    def _held(self, episode: Episode) -> bool:
        """Whether the store's current version of this episode has the same content."""
        old = self.store.get(episode.id)
        return old is not None and old.same_content(episode)

    def reindex(self, progress: Callable[[int], None] | None = None, batch: int = 256) -> int:
        """Re-embed every current episode with the configured embedder."""
        chunks = batches(list(self.store.episodes()), batch)
        return pipelined(chunks, lambda chunk: self.embed([embed_text(e) for e in chunk]), self._reembed(progress))

    def _reembed(self, progress: Callable[[int], None] | None) -> Callable[[list[Episode], Any], int]:
        def store(chunk: list[Episode], vectors: np.ndarray | None) -> int:
            if vectors is None:
                raise EmbedderUnavailable(
                    f"episodic: embedder {self.settings.embedder!r} is unavailable; nothing to reindex with"
                )
            self.store.set_vectors([e.id for e in chunk], vectors)
            if progress:
                progress(len(chunk))
            return len(chunk)

        return store

    # --- reading ----------------------------------------------------------------------

    def recall(
        self,
        text: str,
        *,
        workspace: str,
        peer: str,
        k: int = 5,
        now: float | None = None,
        as_of: float | None = None,
        newest: int | None = None,
    ) -> list[Hit]:
        """The k episodes of this peer and workspace most related to text (embedded while BM25 runs)."""
        query = Query(
            text=text,
            workspace=workspace,
            peer=peer,
            k=k,
            embed=lambda: self._query_vector(text),
            as_of=as_of,
            now=now,
            tau_days=self.settings.tau_days,
            recency_weight=self.settings.recency_weight,
            newest=newest if newest is not None else (self.settings.prefilter_newest or None),
            fusion=self.settings.fusion,
            signals=self.settings.signals,
            agent=self.runtime.agent,  # one agent's episodes (`[thoth] agent`)
        )
        return self.search(query)

    def check_backend(self) -> None:
        """Open the configured backend and run one search without the embedder; raises a one-line ThothError."""
        self.search(Query(text="thoth doctor", workspace="thoth-doctor", peer="thoth-doctor", k=1))

    def search(self, query: Query) -> list[Hit]:
        """The backend's answer to a query; a backend that fails or answers other than Hits raises PluginError."""
        store = self.store
        try:
            hits = store.search(query if getattr(store, "embeds_late", False) else query.with_vector())
        except ThothError:
            raise
        except Exception as exc:
            raise self.backend_error(f"search failed: {type(exc).__name__}: {exc}") from exc
        wrong = next((hit for hit in hits if not isinstance(hit, Hit)), None) if isinstance(hits, list) else hits
        if wrong is not None:
            raise self.backend_error(f"search returned {type(wrong).__name__}, expected a list of Hit")
        return hits

    def _query_vector(self, text: str) -> np.ndarray | None:
        """The query's embedding; None (BM25 alone) when the embedder fails or is still loading at process start."""
        if self._warm_up is not None and self._warm_up.is_alive():
            self._warm_up.join(max(0.1, self.runtime.deadline_for(NAME) - LOADING_MARGIN))
            if self._warm_up.is_alive():
                logger.info("episodic: the embedder is still loading; this recall uses BM25 alone")
                return None
        self.queue.join(QUEUED_WAIT, backfill=False)  # read your own writes: recent turns normally embed in ms
        try:
            vectors = self.embed([text])
        except Exception as exc:  # noqa: BLE001 - a broken embedder leaves BM25
            logger.warning("episodic: embedder %r failed (%s); this recall uses BM25 alone", self.embedder_name, exc)
            return None
        return None if vectors is None else vectors[0]

    # --- retention --------------------------------------------------------------------

    def cutoff(self, before: float | None = None) -> float | None:
        """Episodes that happened before this moment are past retention (None: keep forever).

        A given `before` is the caller's own now minus retention (`thoth reflect nightly --now`)
        and is honoured as it is; without one, retention counts back from the clock.
        """
        if not self.settings.retention_days:
            return None
        return before if before is not None else time.time() - self.settings.retention_days * DAY

    def retire(self) -> int:
        """Delete expired episodes: consolidated ones, or all when no reflection plugin runs."""
        self.last_retire = time.time()
        cutoff = self.cutoff()
        if cutoff is None:
            return 0
        return self.store.purge(cutoff, consolidated_only=self.runtime.pm.has_plugin("reflection"))

    def close(self) -> None:
        """Embed what is still queued, then close the backend.

        The warm-up is waited for: ONNX Runtime's native threads still loading the model when the
        interpreter exits abort the process (`terminate called without an active exception`).
        """
        if self._warm_up is not None:
            self._warm_up.join(WARM_UP_SECONDS)
        self.queue.close()
        if self._store is not None:
            self._store.close()


def _clip(text: str, limit: int = CONTEXT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[-limit:]


def neighbours(context: str, next_user: str) -> str:
    """An episode's neighbour context once the next turn came: the previous turn's line, then the next's.

    Each part is clipped to one line, so the first (the part the vector was computed from) stays
    as the episode's write left it, whatever comes after (`scoring.embed_text`).
    """
    return f"{previous_turn(context)}\n{_clip(next_user)}"


def when(at: float) -> str:
    """A timestamp as a UTC date and time."""
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at))


def render_hit(hit: Hit) -> str:
    """One hit as a context line: date, thread, the turn."""
    e = hit.episode
    reply = f" / agent: {_clip(e.assistant, 240)}" if e.assistant else ""
    return f"- [{when(e.occurred_at)} UTC, thread {e.thread}] {e.peer}: {_clip(e.user, 400)}{reply}"


def explain_hit(index: int, hit: Hit, width: int = LINE_WIDTH) -> str:
    """One hit for /recall as one line: date, peer/thread, the user's words, dense cosine and BM25 rank."""
    e = hit.episode
    words = e.user or e.summary or e.assistant
    return explain_line(
        index,
        at=e.occurred_at,
        peer=e.peer,
        thread=e.thread,
        words=words,
        dense=hit.dense,
        bm25_rank=hit.bm25_rank,
        width=width,
    )


def memory_for(runtime: Runtime) -> EpisodicMemory:
    """The runtime's episodic memory (made on first use)."""
    return runtime.plugin_state(NAME, lambda: EpisodicMemory(runtime))  # type: ignore[no-any-return]


def hits_json(hits: Iterable[Hit]) -> list[dict[str, Any]]:
    """Hits as JSON-ready dicts: the episode and why."""
    return [dict(h.episode.to_dict(), why=h.why()) for h in hits]
