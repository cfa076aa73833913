"""What the write policy can decide: the tiers' names (lowest risk first), the outcomes and `Verdict`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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
