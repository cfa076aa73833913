"""Episodes, recall queries and hits, and the protocol every episodic backend implements.

Episodes are bitemporal: `occurred_at` is when the turn happened, `recorded_at` when this
version was stored, `superseded_at` when a newer version replaced it (None while current).
A read "as of" time T sees the versions recorded at or before T and not yet superseded
then, of episodes that had happened by T.

Each episode belongs to the agent that lived it (`agent`, `[thoth] agent`): reads are scoped to
one agent, forgetting a peer deletes its episodes with every agent. Episodes stored before
agents existed (and exports without the field) belong to `DEFAULT_AGENT`.

A turn has one current episode. Its reply cut short (a process killed mid-stream, the turn then
replayed from the journal) is replaced in place by the whole reply when the turn is run again with
the same turn id (`replaces`); a whole one is never replaced by another version of its turn.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Protocol

from thoth_core.types import CUT_SHORT, DEFAULT_AGENT

if TYPE_CHECKING:
    import numpy as np


def new_episode_id() -> str:
    """A random episode id."""
    return "ep_" + uuid.uuid4().hex[:20]


@dataclass
class Episode:
    """One remembered turn: what the person said, what the agent replied, and where."""

    workspace: str
    peer: str
    thread: str
    user: str
    assistant: str = ""
    summary: str = ""
    id: str = field(default_factory=new_episode_id)
    session_id: str = ""
    turn_id: str = ""
    occurred_at: float = field(default_factory=time.time)
    recorded_at: float = field(default_factory=time.time)
    superseded_at: float | None = None
    cost_usd: float | None = None
    model: str = ""
    context: str = ""
    consolidated: bool = False
    agent: str = DEFAULT_AGENT

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the export format)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Episode:
        """An episode from an exported dict; unknown keys are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def same_content(self, other: Episode) -> bool:
        """True when both versions say the same thing (ignoring record times and index context)."""
        keys: tuple[str, ...] = ("agent", "workspace", "peer", "thread", "user", "assistant", "summary", "occurred_at")
        keys += ("cost_usd", "model")
        return all(getattr(self, k) == getattr(other, k) for k in keys)

    @property
    def cut_short(self) -> bool:
        """Whether the reply is one whose stream stopped early (it ends with the `CUT_SHORT` marker)."""
        return self.assistant.endswith(CUT_SHORT)

    def replaces(self, kept: Episode) -> bool:
        """Whether this version of a turn takes the place of the kept one: a whole reply over a cut-short one."""
        return kept.cut_short and not self.cut_short


@dataclass
class Query:
    """A recall request, always scoped to one workspace, peer and agent."""

    text: str
    workspace: str
    peer: str
    k: int = 5
    vector: np.ndarray | None = None
    as_of: float | None = None
    now: float | None = None
    tau_days: float = 14.0
    recency_weight: float = 0.3
    newest: int | None = None
    fusion: str = "score"
    agent: str = DEFAULT_AGENT
    signals: Any = None  # a `signals.Signals` applied after fusion; None: fusion alone
    embed: Callable[[], np.ndarray | None] | None = None  # computes `vector` late: see `with_vector`

    def with_vector(self) -> Query:
        """This query with `vector` from `embed`: a store calls it once its full-text stage has started."""
        return self if self.embed is None else replace(self, vector=self.embed(), embed=None)


@dataclass
class Hit:
    """A recalled episode and why: per-signal scores, ranks and its age."""

    episode: Episode
    score: float
    dense: float | None = None
    dense_rank: int | None = None
    bm25: float | None = None
    bm25_rank: int | None = None
    recency: float = 1.0
    age_days: float = 0.0

    def why(self) -> dict[str, Any]:
        """The scores per signal, for display and --json."""
        return {
            "score": round(self.score, 4),
            "dense": None if self.dense is None else round(self.dense, 4),
            "dense_rank": self.dense_rank,
            "bm25": None if self.bm25 is None else float(f"{self.bm25:.4g}"),  # FTS5 scores can be ~1e-6
            "bm25_rank": self.bm25_rank,
            "recency": round(self.recency, 4),
            "age_days": round(self.age_days, 2),
        }


class EpisodeStore(Protocol):
    """An episodic backend. `thoth_episodic.contract.StoreContract` is its test suite.

    A store keeps versions: a changed episode is a new row and the old one gets `superseded_at`;
    "current" means `superseded_at is None`. Reads "as of" T see the versions with
    `recorded_at <= T`, `superseded_at` None or `> T`, and `occurred_at <= T`. Reads are scoped to
    one agent (`Episode.agent`; `agent=None` where allowed: every agent's); deletes reach every
    agent. "Oldest first" orders by `occurred_at`, ties in the order the versions were stored.
    A second handle on the same storage sees every write made through another (vectors included),
    as does another process. `docs/writing-a-backend.md` walks through one (`examples/thoth-jsonstore`).
    """

    dim: int  # the embeddings' length: the factory gets it as `options["dim"]`

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes; returns those stored (the same objects, in order).

        Args:
            episodes: in order; an episode sees those stored before it in the same call.
            vectors: row i is episode i's embedding; None: stored without one (`unembedded` lists them).

        Returns:
            The episodes stored. Not stored, so not returned: an episode whose current version has
            the same content (`Episode.same_content`: adding it again is a no-op); an episode whose
            turn id (when not "") already has a current episode of the same workspace and peer under
            another id (a replayed post-turn write must not store the turn twice), unless it
            `replaces` that one (a whole reply over a cut-short one): it then takes the kept
            episode's `id` and `context` (changing the object passed in) and supersedes it in place,
            and any later version of that turn is skipped.

        A changed episode with a known id supersedes the old version: the old version's
        `superseded_at` is set to the moment of this call (`time.time()`) and the new version's
        `recorded_at` is raised to at least that moment, so a read as of a time before it still
        sees the old version.
        """
        ...

    def get(self, episode_id: str, *, as_of: float | None = None) -> Episode | None:
        """The current (or as-of) version of one episode; None once it is deleted, whatever `as_of`."""
        ...

    def episodes(
        self,
        *,
        workspace: str | None = None,
        peer: str | None = None,
        as_of: float | None = None,
        agent: str | None = None,
    ) -> Iterator[Episode]:
        """Current (or as-of) episodes oldest first, each given field narrowing (agent None: every agent's).

        A big store streams them (the contract lists 1,200 in order); `reindex` and export read them all.
        """
        ...

    def latest(self, *, workspace: str, peer: str, thread: str, agent: str = DEFAULT_AGENT) -> Episode | None:
        """The current episode of an agent's thread with the latest `occurred_at` (the last stored on a tie)."""
        ...

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the neighbour context of the current version, in place (not a new version).

        The context is indexed with the episode: a BM25 search for a word only in it finds the episode.
        """
        ...

    def search(self, query: Query) -> list[Hit]:
        """Hybrid recall within the query's scope, best first; at most `query.k` hits, `[]` when none match.

        Candidates are the current versions (as of `query.as_of` if set) of the query's workspace,
        peer and agent exactly, and with `query.newest` only the newest that many of them by
        `occurred_at`. Find the best `scoring.candidate_count(query.k)` per signal over all of them
        (not a prefix of the store: an old episode must be found), as best-first
        `(key, score, occurred_at)` lists with higher scores better:

        - dense: cosine of `query.vector` with each stored vector (none when the vector is None;
          episodes without a vector are not dense candidates);
        - lexical: BM25 of `scoring.query_terms(query.text)` over `scoring.index_text(episode)` and
          its neighbour context; an episode holding none of the words is not a candidate.

        Then return `scoring.rank(query, dense, lexical, load)`, where `load(keys)` gives the
        episodes of those keys: it numbers each list's ranks from 1 (`Hit.dense_rank`,
        `bm25_rank`), fuses them by `query.fusion`, weights by recency (age counted from
        `query.now`, else `as_of`, else the clock) and applies `query.signals`. The contract
        checks exact ranks and recency values, which this ranker gives.

        A store whose class sets `embeds_late = True` may get `embed` in place of `vector`: it starts
        its full-text stage, then calls `query.with_vector()`, so that embedding the query overlaps it.
        Other stores get `vector`."""
        ...

    def delete(
        self, *, workspace: str, peer: str | None = None, thread: str | None = None, ids: Sequence[str] | None = None
    ) -> int:
        """Really delete the matching episodes: every version, every agent's; nothing of them is left.

        Args:
            workspace: always given; `peer`, `thread` and `ids` narrow it (`ids=[]` deletes nothing).

        Returns:
            How many episodes, not versions: an episode stored in two versions counts once.
        """
        ...

    def expiring(self, before: float) -> list[Episode]:
        """Current, not consolidated episodes that happened strictly before `before`, oldest first."""
        ...

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Record that the nightly job absorbed these episodes: they leave `expiring`."""
        ...

    def purge(self, before: float, *, consolidated_only: bool) -> int:
        """Delete every version of the episodes that happened strictly before `before` (only consolidated
        ones if asked); returns how many episodes, not versions."""
        ...

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace the embeddings of the current versions (`vectors[i]` is `ids[i]`'s), in place.

        Dense search then uses them, through this handle and every other (the background embedder
        writes them after the episode was stored and searched for); the episodes leave `unembedded`.
        """
        ...

    def unembedded(self, *, limit: int, recorded_before: float | None = None) -> list[Episode]:
        """Up to `limit` current episodes stored without a vector, oldest first.

        With `recorded_before`, only those with `recorded_at < recorded_before` (strictly).
        """
        ...

    def count(self, *, workspace: str | None = None, peer: str | None = None, agent: str | None = None) -> int:
        """How many current episodes, each given field narrowing (agent None: every agent's)."""
        ...

    def find_turn(self, turn_id: str) -> Episode | None:
        """The current episode written for a turn id."""
        ...

    def close(self) -> None:
        """Release connections; the handle is not used after."""
        ...
