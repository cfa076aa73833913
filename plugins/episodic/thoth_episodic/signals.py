"""Signals applied after fusion, on the candidates' own text and times: neighbours, time, names, speakers.

`rank` fuses dense and BM25 candidates; these signals then adjust each candidate's fused
score using only what the candidate pool already holds (no extra search, any backend):

- neighbours: a candidate gains `neighbour_weight` x the best score among the other
  candidates of its thread that happened within `neighbour_seconds` of it, so the turn right
  after a strong hit (the answer to what the hit asked) rises with it;
- time: when the query asks when / how long / for a date, a candidate whose text mentions
  time (yesterday, last week, May, 2023, ...) is multiplied by `1 + temporal_weight`, one that
  happened on a date the query names by `1 + 2 x temporal_weight`;
- names: a candidate is multiplied by `1 + entity_weight x` the share of the query's
  capitalised names (not its first word) that its text contains;
- speakers: a candidate spoken by a person the query names (its text opens with `Name:`, as a
  transcript labels its speaker) is multiplied by `1 + speaker_weight` instead: a question about
  Melanie is answered by what Melanie said, more than by the turns that only address her
  ("Thanks, Melanie!").

Weights of 0 turn a signal off; the defaults were chosen by leave-one-conversation-out
cross-validation on LoCoMo dev (bench/locomo_recall.py prints the folds and each signal removed).
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from .records import Episode

MONTHS = "january february march april may june july august september october november december".split()
WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_ASKS_WHEN = re.compile(
    r"\b(when|how long|since when|what (year|month|date|day|time)|which (year|month|day|date)|how many "
    r"(years|months|weeks|days))\b",
    re.IGNORECASE,
)
_TIME_WORDS = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|last|next|recently|lately|earlier|soon|since|weekend|"
    r"week|weeks|month|months|year|years|day|days|morning|afternoon|evening|night|"
    + "|".join(MONTHS + WEEKDAYS)
    + r"|(19|20)\d\d)\b",
    re.IGNORECASE,
)
_MONTH = "(" + "|".join(MONTHS) + ")"
_DAY_MONTH_YEAR = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})\b", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_NAME = re.compile(r"\b[A-Z][\w'-]*[a-z][\w'-]*\b")
_SPEAKER = re.compile(r"\s*([A-Z][\w'-]*[a-z][\w'-]*):")
_QUESTION_WORDS = frozenset("what when where who whom whose which why how did does do is was were would could".split())


@dataclass(frozen=True)
class Signals:
    """Post-fusion signal weights; 0 turns one off."""

    neighbour_weight: float = 0.0
    neighbour_seconds: float = 600.0
    temporal_weight: float = 0.0
    entity_weight: float = 0.0
    speaker_weight: float = 0.0

    @property
    def active(self) -> bool:
        """Whether any signal changes scores."""
        return bool(self.neighbour_weight or self.temporal_weight or self.entity_weight or self.speaker_weight)


def asks_when(text: str) -> bool:
    """Whether a query asks about time: when, how long, which year, or names a date."""
    return bool(_ASKS_WHEN.search(text)) or bool(query_dates(text))


def mentions_time(text: str) -> bool:
    """Whether a text mentions a time: relative words, months, weekdays or a year."""
    return bool(_TIME_WORDS.search(text))


def query_dates(text: str) -> set[date]:
    """The calendar dates a query names (`7 May 2023`, `May 7, 2023`, `2023-05-07`)."""
    found: set[date] = set()
    for day, month, year in _DAY_MONTH_YEAR.findall(text):
        found |= _date(int(year), MONTHS.index(month.lower()) + 1, int(day))
    for month, day, year in _MONTH_DAY_YEAR.findall(text):
        found |= _date(int(year), MONTHS.index(month.lower()) + 1, int(day))
    for year, month, day in _ISO.findall(text):
        found |= _date(int(year), int(month), int(day))
    return found


def _date(year: int, month: int, day: int) -> set[date]:
    try:
        return {date(year, month, day)}
    except ValueError:
        return set()


def query_names(text: str) -> set[str]:
    """The capitalised names of a query, leaving out its first word and question words."""
    words = _NAME.findall(text)
    first = re.match(r"\W*([\w'-]+)", text)
    names = {w for w in words if w.lower() not in _QUESTION_WORDS}
    if first and text.count(first.group(1)) == 1:
        names.discard(first.group(1))
    return {n[:-2] if n.endswith("'s") else n for n in names}


def speaker(text: str) -> str | None:
    """The name a transcript line opens with (`Melanie: I went camping`), or None."""
    match = _SPEAKER.match(text)
    return match.group(1) if match else None


def _text(episode: Episode) -> str:
    return f"{episode.user}\n{episode.assistant}"


def adjust(
    scores: Mapping[Any, float], episodes: Mapping[Any, Episode], query_text: str, signals: Signals
) -> dict[Any, float]:
    """Each candidate's score after the signals (candidates without a loaded episode keep theirs)."""
    out = dict(scores)
    if signals.neighbour_weight:
        by_thread: dict[tuple[str, str], list[tuple[float, Any]]] = {}
        for key, episode in episodes.items():
            if key in scores:
                by_thread.setdefault((episode.peer, episode.thread), []).append((episode.occurred_at, key))
        for members in by_thread.values():
            members.sort(key=lambda pair: pair[0])
            times = [at for at, _ in members]
            for i, (at, key) in enumerate(members):
                low = bisect_left(times, at - signals.neighbour_seconds)
                high = bisect_right(times, at + signals.neighbour_seconds)
                near = [scores[k] for _, k in members[low:i] + members[i + 1 : high]]
                if near:
                    out[key] += signals.neighbour_weight * max(near)
    if signals.temporal_weight and asks_when(query_text):
        days = query_dates(query_text)
        for key, episode in episodes.items():
            on_day = datetime.fromtimestamp(episode.occurred_at, UTC).date() in days
            if key in out and (on_day or mentions_time(_text(episode))):
                out[key] *= 1 + signals.temporal_weight * (2 if on_day else 1)
    names = query_names(query_text) if signals.entity_weight or signals.speaker_weight else set()
    if not names:
        return out
    for key, episode in episodes.items():
        if key not in out:
            continue
        if signals.speaker_weight and speaker(episode.user) in names:
            out[key] *= 1 + signals.speaker_weight
        elif signals.entity_weight:
            present = set(_NAME.findall(_text(episode)))
            present |= {n[:-2] for n in present if n.endswith("'s")}
            out[key] *= 1 + signals.entity_weight * len(names & present) / len(names)
    return out
