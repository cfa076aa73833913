"""The reads both episode stores share: one statement each, run through `thoth_core.database` in either dialect.

`SQLiteStore` and `PostgresStore` keep their episodes in one table of the same shape (only its name
and the user text's column differ) on a `thoth_core.database.Database`, so every read that is
not search (paging, the latest turn of a thread, a turn, the unembedded and expiring rows, counts,
the rows search ranked) is written once here, with `?` placeholders and the SQL both dialects
share. What stays with each store is what the dialects do differently: writing (FTS5 and the
ANN files beside SQLite, pgvector's column in PostgreSQL), the full-text stage (FTS5 or tsvector)
and the dense stage (usearch or pgvector).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from thoth_core.database import Database
from thoth_core.types import DEFAULT_AGENT

from .records import Episode

FIELDS = (
    "id, workspace, peer, thread, session_id, turn_id, user, assistant, summary, context, "
    "occurred_at, recorded_at, superseded_at, cost_usd, model, consolidated, agent"
).split(", ")  # an `Episode`'s fields, in the order the stores select their columns
AS_OF = "recorded_at <= ? AND (superseded_at IS NULL OR superseded_at > ?) AND occurred_at <= ?"
PAGE_ROWS = 1000  # `episodes` reads this many rows at a time, so a big store streams
CHUNK_IDS = 500  # ids per statement where a statement names many


def columns(user_column: str) -> str:
    """The columns an `Episode` is read from, the user text's column named as the dialect's table names it."""
    return ", ".join(user_column if name == "user" else name for name in FIELDS)


def episode(row: Sequence[Any]) -> Episode:
    """An `Episode` from a row of `columns` (SQLite's 0/1 flag made a bool)."""
    values = list(row)
    values[15] = bool(values[15])
    return Episode(**dict(zip(FIELDS, values, strict=True)))


class EpisodeTable:
    """Mixed into both stores: the reads written once over `database` (`table`, `COLUMNS` and `LOCK_ROWS` per store)."""

    database: Database
    TABLE: str  # the episodes table's name
    COLUMNS: str  # `columns(...)` of the store's table
    LOCK_ROWS = ""  # appended to the select `_takes_turn` runs in a write transaction (PostgreSQL: `FOR UPDATE`)

    def _select(self, where: str, params: Sequence[Any], tail: str = "") -> list[Episode]:
        rows = self.database.fetch(f"SELECT {self.COLUMNS} FROM {self.TABLE} WHERE {where} {tail}", list(params))
        return [episode(r) for r in rows]

    def _current(self, episode_id: str) -> Episode | None:
        found = self._select("id = ? AND superseded_at IS NULL", [episode_id])
        return found[0] if found else None

    def _takes_turn(self, new: Episode) -> bool:
        """Whether the episode may be its turn's current one; one replacing a cut-short version takes its id.

        False when another episode is the turn's current one and stays (a replayed post-turn write).
        Runs in the write transaction (PostgreSQL locks the kept row, so two processes replacing it replace it once).
        """
        if not new.turn_id:
            return True
        found = self._select(
            "workspace = ? AND peer = ? AND turn_id = ? AND superseded_at IS NULL AND id <> ?",
            [new.workspace, new.peer, new.turn_id, new.id],
            "LIMIT 1" + self.LOCK_ROWS,
        )
        if not found:
            return True
        kept = found[0]
        if not new.replaces(kept):
            return False
        new.id, new.context = kept.id, kept.context
        return True

    def get(self, episode_id: str, *, as_of: float | None = None) -> Episode | None:
        """The current (or as-of) version of one episode."""
        if as_of is None:
            return self._current(episode_id)
        found = self._select("id = ? AND " + AS_OF, [episode_id, as_of, as_of, as_of])
        return found[0] if found else None

    def episodes(
        self,
        *,
        workspace: str | None = None,
        peer: str | None = None,
        as_of: float | None = None,
        agent: str | None = None,
    ) -> Iterator[Episode]:
        """Episodes oldest first (agent None: every agent's), in pages so a big store streams."""
        where, params = _visible(as_of)
        _narrow(where, params, workspace=workspace, peer=peer, agent=agent)
        last: tuple[float, int] = (float("-inf"), 0)
        while True:
            rows = self.database.fetch(
                f"SELECT occurred_at, rowid, {self.COLUMNS} FROM {self.TABLE} "
                f"WHERE (occurred_at, rowid) > (?, ?) AND {' AND '.join(where)} "
                f"ORDER BY occurred_at, rowid LIMIT {PAGE_ROWS}",
                [*last, *params],
            )
            if not rows:
                return
            last = (rows[-1][0], rows[-1][1])
            yield from (episode(r[2:]) for r in rows)

    def newest(
        self, *, workspace: str, peer: str, agent: str, limit: int, before: float | None = None
    ) -> list[Episode]:
        """An agent's current episodes of a peer, newest first (happened before `before`, if given), at most `limit`."""
        where = ["workspace = ?", "peer = ?", "agent = ?", "superseded_at IS NULL"]
        params: list[Any] = [workspace, peer, agent]
        if before is not None:
            where.append("occurred_at < ?")
            params.append(before)
        return self._select(" AND ".join(where), params, f"ORDER BY occurred_at DESC, rowid DESC LIMIT {int(limit)}")

    def versions(self, episode_id: str) -> list[Episode]:
        """Every stored version of one episode, the newest (the current one) first."""
        return self._select("id = ?", [episode_id], "ORDER BY recorded_at DESC, rowid DESC")

    def latest(self, *, workspace: str, peer: str, thread: str, agent: str = DEFAULT_AGENT) -> Episode | None:
        """The newest current episode of an agent's thread."""
        found = self._select(
            "workspace = ? AND peer = ? AND thread = ? AND agent = ? AND superseded_at IS NULL",
            [workspace, peer, thread, agent],
            "ORDER BY occurred_at DESC, rowid DESC LIMIT 1",
        )
        return found[0] if found else None

    def find_turn(self, turn_id: str) -> Episode | None:
        """The current episode of a turn."""
        found = self._select("turn_id = ? AND superseded_at IS NULL", [turn_id])
        return found[0] if found else None

    def unembedded(self, *, limit: int, recorded_before: float | None = None) -> list[Episode]:
        """Current episodes stored without a vector (recorded before a moment, if given), oldest first."""
        return self._select(
            "embedding IS NULL AND superseded_at IS NULL AND recorded_at < ?",
            [float("inf") if recorded_before is None else recorded_before],
            f"ORDER BY occurred_at LIMIT {int(limit)}",
        )

    def expiring(self, before: float) -> list[Episode]:
        """Current, unconsolidated episodes that happened before `before`."""
        return self._select(
            "occurred_at < ? AND NOT consolidated AND superseded_at IS NULL", [before], "ORDER BY occurred_at"
        )

    def count(self, *, workspace: str | None = None, peer: str | None = None, agent: str | None = None) -> int:
        """How many current episodes (agent None: every agent's)."""
        where, params = _visible(None)
        _narrow(where, params, workspace=workspace, peer=peer, agent=agent)
        return int(self.database.fetch(f"SELECT count(*) FROM {self.TABLE} WHERE {' AND '.join(where)}", params)[0][0])

    def delete(
        self, *, workspace: str, peer: str | None = None, thread: str | None = None, ids: Sequence[str] | None = None
    ) -> int:
        """Delete every version of the matching episodes (a forget: nothing of them is left); how many episodes."""
        if ids is not None and not ids:
            return 0
        where, params = ["workspace = ?"], [workspace]
        _narrow(where, params, peer=peer, thread=thread)
        if ids is not None:
            where.append(f"id IN ({marks(len(ids))})")
            params += list(ids)
        return self._delete_where(" AND ".join(where), params, forget=True)

    def purge(self, before: float, *, consolidated_only: bool) -> int:
        """Delete episodes that happened before `before`."""
        return self._delete_where(
            "occurred_at < ?" + (" AND consolidated" if consolidated_only else ""), [before], forget=False
        )

    def _delete_where(self, where: str, params: Sequence[Any], *, forget: bool) -> int:
        """Delete every row matching `where` in the dialect's way (`forget`: scrub what is left of them)."""
        raise NotImplementedError

    def mark_consolidated(self, ids: Sequence[str]) -> None:
        """Flag episodes as absorbed by the nightly job."""
        ids = list(ids)
        with self.database.transaction() as tx:
            for start in range(0, len(ids), CHUNK_IDS):
                chunk = ids[start : start + CHUNK_IDS]
                tx.execute(f"UPDATE {self.TABLE} SET consolidated = TRUE WHERE id IN ({marks(len(chunk))})", chunk)

    def _load_rows(self, rowids: list[int]) -> dict[int, Episode]:
        """The rows search ranked, by rowid."""
        if not rowids:
            return {}
        rows = self.database.fetch(
            f"SELECT rowid, {self.COLUMNS} FROM {self.TABLE} WHERE rowid IN ({marks(len(rowids))})", rowids
        )
        return {r[0]: episode(r[1:]) for r in rows}


def marks(n: int) -> str:
    """`n` placeholders, comma-separated."""
    return ", ".join("?" * n)


def _visible(as_of: float | None) -> tuple[list[str], list[Any]]:
    """The condition (and its parameters) of the versions current now, or at `as_of`."""
    return ([AS_OF], [as_of] * 3) if as_of is not None else (["superseded_at IS NULL"], [])


def _narrow(where: list[str], params: list[Any], **columns: str | None) -> None:
    """Add `column = ?` for each column given a value."""
    for column, value in columns.items():
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
