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

The modules: `verdict` (the tiers' names, the outcomes and `Verdict`), `tiers` (the tiers and the
English word tables), `language` (whether a text is plain English), `cues` (order words of 14
languages and 6 romanisations), `firewall` (injection phrasing, commands, URLs). This module imports
the last four only at the first judgement: a layer's settings can name tiers without compiling the
tables (`warm` compiles them ahead, in a warm-up thread).
"""

from __future__ import annotations

from collections.abc import Iterable

from .verdict import (
    ALWAYS_HELD,
    APPLIED,
    DEFAULT_AUTO_APPLY,
    HELD,
    SOURCE_HELD,
    TIERS,
    UNJUDGED,
    Verdict,
    hold_flags,
    may_auto_apply,
)

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
