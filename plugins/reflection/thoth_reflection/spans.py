"""Which turns of a session reflection has not seen yet, so each span of turns is reflected once.

A session can end more than once: a frontend exit ends it resumably, the working layer hands the
whole transcript back when it resumes, and it ends again later. The store remembers, per
session, the last turn a successful run covered (its id, and how many turns that was as a
fallback); only the entries after it are reflected next time.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from thoth_core import Session

from .store import Store


def turns_in(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The answered turns among transcript entries."""
    return [e for e in entries if e.get("type") == "turn"]


def unreflected(store: Store, session: Session) -> list[dict[str, Any]]:
    """The transcript entries after the last turn a successful run covered (all when none did)."""
    entries = list(session.transcript)
    mark = store.reflected(session.id)
    if mark is None:
        return entries
    positions = [
        i for i, e in enumerate(entries) if e.get("type") == "turn" and e.get("turn_id") == mark["last_turn_id"]
    ]
    if positions:
        return entries[positions[-1] + 1 :]
    seen = 0
    for i, entry in enumerate(entries):  # the marked turn is gone: skip as many turns as were reflected
        if entry.get("type") == "turn":
            if seen == mark["turns"]:
                return entries[i:]
            seen += 1
    return []


def span_session(session: Session, entries: list[dict[str, Any]]) -> Session:
    """A copy of the session whose transcript is only the span to reflect on."""
    return replace(session, transcript=entries)


def mark_reflected(store: Store, session: Session, span: list[dict[str, Any]]) -> None:
    """Remember that the session is reflected up to the span's last turn."""
    turns = turns_in(span)
    if turns:
        store.mark_reflected(session.id, str(turns[-1].get("turn_id") or ""), len(turns_in(session.transcript)))
