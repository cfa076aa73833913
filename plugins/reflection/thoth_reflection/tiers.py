"""Risk tiers of reflection's proposals and the policy deciding which of them apply without a person.

Every memory note, identity update and persona observation gets one tier from the shared write
policy (`thoth_core.write_policy`: `self-fact`, `general`, `other-peer`, `tool`, `instruction`,
`unjudged`, `authority`, lowest risk first; the tiers, word tables, language reading and cues live
there, so the identity layer judges its own observations the same way). Only the tiers in
`[plugins.reflection] auto_apply` (default `["self-fact"]`, checked by `policy.check_policy`) are
applied without review; `unjudged` and `authority` never are. This module shapes the tiers like a
result's `flags` and decides, for a whole result, which peers' proposals are suspect: a run that
proposes unreadable text, an injection or foreign order words, or whose peer asked to set rules
aside, holds its other notes and identity updates about that peer too (`source-held`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from thoth_core.write_policy import SOURCE_HELD, hold_flags, judge, may_auto_apply, suspect_source
from thoth_core.write_policy.tiers import Assessment, classify, rank, riskier

from . import firewall

__all__ = [
    "NEVER_SUMMARISED",
    "SOURCE_HELD",
    "Assessment",
    "classify",
    "held_with",
    "hold_flags",
    "may_auto_apply",
    "rank",
    "riskier",
    "suspect_peers",
    "suspect_source",
    "tiers_for",
]

NEVER_SUMMARISED = frozenset({"unjudged", "instruction", "authority"})  # the nightly snapshot drops these tiers


def tiers_for(result: dict[str, Any], *, peer: str, known_peers: Iterable[str]) -> dict[str, Any]:
    """Each proposal's tier, shaped like `flags` (`{field: {index: tier}}`, updates `{peer: {index: tier}}`)."""
    known = set(known_peers) | set(result.get("user_model_updates") or {})
    tiers: dict[str, Any] = {}
    for field in ("memory_notes", "persona_observations"):
        tiers[field] = {
            str(index): classify(text, peer=peer, known_peers=known).tier
            for index, text in enumerate(result.get(field) or [])
        }
    tiers["user_model_updates"] = {
        who: {str(i): classify(text, peer=peer, known_peers=known, about=who).tier for i, text in enumerate(items)}
        for who, items in (result.get("user_model_updates") or {}).items()
    }
    skill = result.get("skill")
    if skill:
        text = " ".join(str(skill.get(part, "")) for part in ("description", "body"))
        tiers["skill"] = riskier("instruction", classify(text, peer=peer, known_peers=known).tier)
    return tiers


def suspect_peers(
    result: dict[str, Any], flags: dict[str, Any], proposal_tiers: dict[str, Any], *, peer: str, said: Iterable[str]
) -> dict[str, str]:
    """Peers (lower case) none of whose proposals in this result may apply unreviewed -> why.

    An identity update like "Prefers French" reads as a plain fact, but when the note beside it, or the
    peer's message it came from, was an order in French, the update is that order restated: its source
    text must pass the policy too. The result's sources are the notes (the session's peer), the
    updates about each peer and the peer's messages in the reflected turns (`said`)."""
    suspect: dict[str, str] = {}
    for index, text in enumerate(result.get("memory_notes") or []):
        why = suspect_source(
            text,
            tier=proposal_tiers.get("memory_notes", {}).get(str(index), ""),
            flags=flags.get("memory_notes", {}).get(str(index), []),
        )
        if why:
            suspect.setdefault(peer.lower(), f"a memory note of this run: {why}")
    for who, items in (result.get("user_model_updates") or {}).items():
        for index, text in enumerate(items):
            why = suspect_source(
                text,
                tier=proposal_tiers.get("user_model_updates", {}).get(who, {}).get(str(index), ""),
                flags=flags.get("user_model_updates", {}).get(who, {}).get(str(index), []),
            )
            if why:
                suspect.setdefault(who.lower(), f"an identity update of this run: {why}")
    for message in said:
        if "injection" in firewall.check_text(message):
            suspect.setdefault(peer.lower(), "a message of the session asks to set rules or instructions aside")
    return suspect


def held_with(
    text: str, *, peer: str, auto_apply: Iterable[str], known_peers: Iterable[str] = (), about: str | None = None
) -> list[str]:
    """The flags one proposal would be held with at a session end under a policy ([] = applied unreviewed):
    the firewall's (and `other-peer` for another person), else its tier when the policy holds it."""
    return list(judge(text, peer=peer, auto_apply=auto_apply, known_peers=known_peers, about=about).flags)
