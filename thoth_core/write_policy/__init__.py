"""The write policy: which text a layer may keep and show without a person, in any language.

A layer that keeps text someone could have shaped (reflection's notes and identity updates, the
identity deriver's observations, a memory server's answers) asks `judge` about each text. The
verdict is `applied` only for text the policy positively recognises as harmless: its tier is one
of the caller's `auto_apply` tiers (default `self-fact`, a plain statement of fact about the
speaking peer) and the firewall flags nothing. It is `unjudged` for text the policy cannot read
(not plain English: another language or script, accented, transliterated or hidden words), held
whatever the caller's tiers; and `held` for the rest (an instruction to the agent, authority,
tools, other people, injection phrasing, commands, URLs). `suspect_source` says when a text makes
everything else drawn from the same source suspect (unreadable text, a request to set rules
aside, order words of another language): "Prefers French" drawn from an order in French waits
with it (flag `source-held`).

The modules: `tiers` (the tiers and the English word tables), `language` (whether a text is plain
English), `cues` (order words of 14 languages and 6 romanisations), `firewall` (injection phrasing,
commands, URLs). This module imports none of them until the first judgement: a layer's settings
can name tiers without compiling the tables (`warm` compiles them ahead, in a warm-up thread).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "ALWAYS_HELD",
    "APPLIED",
    "DEFAULT_AUTO_APPLY",
    "HELD",
    "SOURCE_HELD",
    "TIERS",
    "UNJUDGED",
    "Verdict",
    "hold_flags",
    "judge",
    "may_auto_apply",
    "suspect_source",
    "warm",
]

TIERS = ("self-fact", "general", "other-peer", "tool", "instruction", "unjudged", "authority")  # lowest risk first
ALWAYS_HELD = frozenset({"unjudged", "authority"})  # no policy applies these
DEFAULT_AUTO_APPLY = ("self-fact",)
APPLIED, HELD, UNJUDGED = "applied", "held", "unjudged"  # a verdict's outcomes
SOURCE_HELD = "source-held"  # the flag of a text held because another text from its source was suspect


@dataclass(frozen=True)
class Verdict:
    """What the policy decides about one text: its outcome, tier, the flags it is held with, and why."""

    outcome: str  # APPLIED, HELD or UNJUDGED
    tier: str
    flags: tuple[str, ...] = ()  # () when applied; else the firewall's flags, or the tier
    evidence: tuple[str, ...] = ()  # the words that put it in its tier

    @property
    def applied(self) -> bool:
        """Whether the text may be kept and shown without a person."""
        return self.outcome == APPLIED


def may_auto_apply(tier: str, auto_apply: Iterable[str]) -> bool:
    """Whether a policy lets a text of this tier apply without review (never `unjudged` or `authority`)."""
    return tier not in ALWAYS_HELD and tier in set(auto_apply)


def hold_flags(tier: str, flags: list[str], auto_apply: Iterable[str]) -> list[str]:
    """The flags a text is held with: the firewall's, else its tier when the policy holds it; [] applies it."""
    if flags:
        return list(flags)
    return [] if may_auto_apply(tier, auto_apply) else [tier]


def judge(
    text: str,
    *,
    peer: str,
    auto_apply: Iterable[str] = DEFAULT_AUTO_APPLY,
    known_peers: Iterable[str] = (),
    about: str | None = None,
) -> Verdict:
    """The verdict on one text from a conversation of `peer` (`about`: the peer a statement concerns).

    The firewall's flags (and `other-peer` for text about another known peer) hold a text whatever
    its tier; otherwise its tier must be one of `auto_apply`.
    """
    from . import firewall, tiers

    known = set(known_peers)
    flags = firewall.check_text(text)
    if firewall.other_peers(text, own=about or peer, known=known) or (about and about.lower() != peer.lower()):
        flags.append("other-peer")
    assessment = tiers.classify(text, peer=peer, known_peers=known, about=about)
    held = hold_flags(assessment.tier, flags, auto_apply)
    outcome = APPLIED if not held else UNJUDGED if assessment.tier == "unjudged" else HELD
    return Verdict(outcome, assessment.tier, tuple(held), assessment.evidence)


def suspect_source(text: str, *, tier: str, flags: Iterable[str]) -> str | None:
    """Why a text (or a message it came from) makes the rest drawn from the same source suspect:
    text the policy cannot read, a request to set rules aside, or instruction cues of another language."""
    from . import cues

    if "injection" in flags:
        return "injection"
    if tier == "unjudged":
        return "unjudged"
    return "instruction cues of another language" if cues.foreign_cues(text) else None


def warm() -> None:
    """Load the word list and compile the tables now, so the first judgement does not pay for them."""
    judge("Ann prefers tea.", peer="ann")
