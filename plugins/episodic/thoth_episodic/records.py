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
    """An episodic backend. `thoth_episodic.contract.StoreContract` is its test suite."""

    dim: int

    def add(self, episodes: Sequence[Episode], vectors: np.ndarray | None = None) -> list[Episode]:
        """Store episodes; returns those stored.

        A changed episode with a known id supersedes the old version. An episode whose turn id
        (when not empty) already has a current episode of the same workspace and peer under
        another id is skipped: a replayed post-turn write must not store the turn twice.
        """
        ...

    def get(self, episode_id: str, *, as_of: float | None = None) -> Episode | None:
        """The current (or as-of) version of one episode."""
        ...

    def episodes(
        self,
        *,
        workspace: str | None = None,
        peer: str | None = None,
        as_of: float | None = None,
        agent: str | None = None,
    ) -> Iterator[Episode]:
        """Episodes oldest first, optionally scoped (agent None: every agent's) and read as of a past moment."""
        ...

    def latest(self, *, workspace: str, peer: str, thread: str, agent: str = DEFAULT_AGENT) -> Episode | None:
        """The newest current episode of an agent's thread."""
        ...

    def set_context(self, episode_id: str, context: str) -> None:
        """Replace the neighbour context indexed with an episode (not a new version)."""
        ...

    def search(self, query: Query) -> list[Hit]:
        """Hybrid recall within the query's scope (workspace, peer and agent), best first.

        A store whose class sets `embeds_late = True` may get `embed` in place of `vector`: it starts
        its full-text stage, then calls `query.with_vector()`, so that embedding the query overlaps it.
        Other stores get `vector`."""
        ...

    def delete(
        self, *, workspace: str, peer: str | None = None, thread: str | None = None, ids: Sequence[str] | None = None
    ) -> int:
        """Really delete episodes (every version, every agent's); returns how many episodes."""
        ...

    def expiring(self, before: float) -> list[Episode]:
        """Current episodes that happened before `before` and are not consolidated."""
        ...

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Record that the nightly job absorbed these episodes."""
        ...

    def purge(self, before: float, *, consolidated_only: bool) -> int:
        """Delete episodes that happened before `before` (only consolidated ones if asked)."""
        ...

    def set_vectors(self, ids: Sequence[str], vectors: np.ndarray) -> None:
        """Replace stored embeddings (reindex)."""
        ...

    def unembedded(self, *, limit: int, recorded_before: float | None = None) -> list[Episode]:
        """Up to `limit` current episodes stored without a vector, recorded before a moment if given, oldest first."""
        ...

    def count(self, *, workspace: str | None = None, peer: str | None = None, agent: str | None = None) -> int:
        """How many current episodes (agent None: every agent's)."""
        ...

    def find_turn(self, turn_id: str) -> Episode | None:
        """The current episode written for a turn id."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...
