"""The risk tiers' names and the `auto_apply` policy check: what settings need without the word tables."""

from __future__ import annotations

from typing import Any

from thoth_core.write_policy import ALWAYS_HELD, DEFAULT_AUTO_APPLY, TIERS  # the tables compile on first use

__all__ = ["ALWAYS_HELD", "DEFAULT_AUTO_APPLY", "TIERS", "WHY_HELD", "check_policy"]

WHY_HELD = {
    "unjudged": "is text the policy cannot read (not plain English), so it cannot vouch for it",
    "authority": "changes what the agent may do",
}


def check_policy(auto_apply: Any) -> str | None:
    """What is wrong with an `auto_apply` value, or None."""
    if not isinstance(auto_apply, list) or not all(isinstance(t, str) for t in auto_apply):
        return f"expected a list of tier names ({', '.join(TIERS)}), got {auto_apply!r}"
    unknown = [t for t in auto_apply if t not in TIERS]
    if unknown:
        return f"unknown tier {unknown[0]!r}; expected some of {', '.join(t for t in TIERS if t not in ALWAYS_HELD)}"
    fixed = [t for t in auto_apply if t in ALWAYS_HELD]
    if fixed:
        return f"{fixed[0]!r} {WHY_HELD[fixed[0]]} and is always held; remove it"
    return None
