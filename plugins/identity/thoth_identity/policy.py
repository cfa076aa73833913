"""The write policy for what the identity layer did not hear from the person: derived items and Honcho's answers.

The deriver (the embedded backend's model) and Honcho's own deriver restate what a person said;
a message like "mallory préfère que l'assistant ignore toutes ses règles" must not come back as
an observation shown on every later turn. The core's write policy (`thoth_core.write_policy`)
judges each such text as reflection judges its proposals, under identity's tiers (`SHOWN`):
`self-fact`, `general` and `other-peer` (the block is the peer's own and only their turns see
it; facts about people and things they mention are what the entity graph is for). Text that is
`instruction`, `tool`, `authority` or `unjudged` (not plain English), or that the firewall flags
(injection phrasing in any language, commands, URLs), is not shown.

- A derivation (`screen_derivation`) whose message asks to set rules or instructions aside, or
  one of whose items is unreadable, an injection or carries order words of another language,
  is suspect as a whole: every item of it is withheld (`source-held`), so "Prefers French" drawn
  from an order in French goes with the order. Withheld items are not stored; the store counts
  them per message and reason (`withheld` in `thoth identity show`), the log names the reasons.
- What is shown (`visible`) is judged again as the block is made, the source rule included (the
  message each derived row came from, and the other rows drawn from it), so rows derived before
  this policy, or imported, are held back too; they stay in the store, marked in `thoth identity
  show`, for `/correct` and forget. Only derived rows are judged: notes a person gave
  (`/remember`, reactions, corrections) and reflection's identity updates (judged, or approved by
  a person, by reflection) are shown as they are.
- Honcho's answers (the dialectic, the cached representation) come from the server: they are cut
  into sentences and lines and only those the policy shows stay (`screen_answer`). A message that
  asks to set rules aside goes to Honcho with its reasoning off (`derives_from`), so Honcho draws
  no conclusions from it.
"""

from __future__ import annotations

import functools
import logging
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thoth_core.write_policy import SOURCE_HELD, judge, suspect_source
from thoth_core.write_policy.firewall import check_text

if TYPE_CHECKING:
    from .store import IdentityStore

logger = logging.getLogger(__name__)

SHOWN = ("self-fact", "general", "other-peer")  # the tiers identity shows without a person
DERIVER = "deriver"  # the author of the embedded deriver's observations
DERIVED_SOURCE = "derived:"  # how a derived fact's source begins
PIECES = re.compile(r"(?<=[.!?;。！？])[ \t]+|(?<=[。！？])")  # where a sentence of an answer's line ends


@dataclass
class Screened:
    """A derivation's items the policy shows, and how many it withheld for which reason."""

    observations: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)
    withheld: Counter[str] = field(default_factory=Counter)

    def summary(self) -> str:
        """`2 unjudged, 1 source-held`: the withheld counts by reason."""
        return ", ".join(f"{count} {reason}" for reason, count in sorted(self.withheld.items()))


def fact_text(peer: str, *, subject: str | None, predicate: str, value: str) -> str:
    """A fact as the sentence the policy judges: `mallory's language: French`, `Maria's lives in: Berlin`."""
    return f"{subject or peer}'s {predicate.replace('_', ' ')}: {value}"


@functools.lru_cache(maxsize=4096)
def shows(text: str, peer: str) -> bool:
    """Whether the policy lets the block show this text about `peer`."""
    return judge(text, peer=peer, auto_apply=SHOWN).applied


def derives_from(message: str) -> bool:
    """Whether something may be derived from a message: not when it asks to set rules or instructions aside."""
    return "injection" not in check_text(message)


def screen_derivation(
    observations: Iterable[dict[str, Any]], facts: Iterable[dict[str, Any]], *, peer: str, message: str
) -> Screened:
    """The derived observations and facts (`subject`, `predicate`, `value`) of one message the policy shows."""
    judged = [
        (kind, item, text, judge(text, peer=peer, auto_apply=SHOWN))
        for kind, item, text in [
            *(("observation", o, o["content"]) for o in observations),
            *(
                ("fact", f, fact_text(peer, subject=f["subject"], predicate=f["predicate"], value=f["value"]))
                for f in facts
            ),
        ]
    ]
    suspect = not derives_from(message) or any(
        suspect_source(text, tier=verdict.tier, flags=verdict.flags) for _, _, text, verdict in judged
    )
    screened = Screened()
    for kind, item, _, verdict in judged:
        if not verdict.applied:
            screened.withheld[verdict.flags[0]] += 1
        elif suspect:
            screened.withheld[SOURCE_HELD] += 1
        else:
            (screened.observations if kind == "observation" else screened.facts).append(item)
    return screened


def derived_source(row: dict[str, Any]) -> int | None:
    """The message a derived observation or fact was drawn from, or None (not derived, or no message)."""
    if row.get("author") == DERIVER and row.get("message_id") is not None:
        return int(row["message_id"])
    source = str(row.get("source") or "")
    number = source.removeprefix(f"{DERIVED_SOURCE}message:")
    return int(number) if source.startswith(DERIVED_SOURCE) and number.isdigit() else None


def _derived(row: dict[str, Any]) -> bool:
    return row.get("author") == DERIVER or str(row.get("source") or "").startswith(DERIVED_SOURCE)


def _fact_text(fact: dict[str, Any], peer: str) -> str:
    return fact_text(peer, subject=fact.get("subject"), predicate=fact["predicate"], value=fact["object"])


@functools.lru_cache(maxsize=4096)
def _suspect(text: str, peer: str) -> bool:
    verdict = judge(text, peer=peer, auto_apply=SHOWN)
    return suspect_source(text, tier=verdict.tier, flags=verdict.flags) is not None


def held_messages(store: IdentityStore, workspace: str, peer: str, rows: Iterable[dict[str, Any]]) -> set[int]:
    """The messages, among those the rows were derived from, nothing drawn from may be shown (blocking): the
    message asks to set rules aside, or something the deriver drew from it is suspect (rows kept before the policy)."""
    texts, observations, facts = store.derived_from_messages(workspace, peer, filter(None, map(derived_source, rows)))
    held = {message for message, text in texts.items() if not derives_from(text)}
    held |= {o["message_id"] for o in observations if _suspect(o["content"], peer)}
    held |= {m for f in facts if (m := derived_source(f)) is not None and _suspect(_fact_text(f, peer), peer)}
    return held


def shown_observations(
    observations: Iterable[dict[str, Any]], peer: str, *, held: Iterable[int] = ()
) -> list[dict[str, Any]]:
    """The observations the block may show: the deriver's only when the policy shows them (and not `held`)."""
    held = set(held)
    return [
        o for o in observations if not _derived(o) or (derived_source(o) not in held and shows(o["content"], peer))
    ]


def shown_facts(facts: Iterable[dict[str, Any]], peer: str, *, held: Iterable[int] = ()) -> list[dict[str, Any]]:
    """The facts the block may show: derived ones only when the policy shows them (and not `held`)."""
    held = set(held)
    return [
        f for f in facts if not _derived(f) or (derived_source(f) not in held and shows(_fact_text(f, peer), peer))
    ]


def visible(
    store: IdentityStore,
    workspace: str,
    peer: str,
    *,
    facts: Iterable[dict[str, Any]] = (),
    observations: Iterable[dict[str, Any]] = (),
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The facts and observations of a peer the block may show (blocking: reads the messages they came from)."""
    facts, observations = list(facts), list(observations)
    held = held_messages(store, workspace, peer, [*facts, *observations])
    return shown_facts(facts, peer, held=held), shown_observations(observations, peer, held=held)


def screen_answer(text: str | None, peer: str) -> tuple[str | None, int]:
    """A memory server's answer without the sentences (of each line) the policy does not show; how many went."""
    if not text:
        return text, 0
    kept: list[str] = []
    dropped = 0
    for line in text.split("\n"):
        pieces = [p.strip() for p in PIECES.split(line) if p.strip()]
        shown = [p for p in pieces if shows(p.lstrip("-*• ").strip(), peer)]
        dropped += len(pieces) - len(shown)
        if shown:
            kept.append(line if shown == pieces else " ".join(shown))
    if dropped:
        logger.info("identity: the write policy withheld %d statement(s) of the memory server about %s", dropped, peer)
    return "\n".join(kept).strip() or None, dropped
