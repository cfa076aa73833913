"""The `user-model` block: hard facts, the dialectic's answer and observations, within a token budget."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from thoth_core import ContextBlock
from thoth_core.budget import block_tokens, truncate

from .store import query_terms

TAG = "user-model"
PRIORITY = 70


def relevant_facts(facts: list[dict[str, Any]], text: str) -> list[dict[str, Any]]:
    """Facts ordered for a message: the name first, then those sharing words with it, then the rest."""
    terms = set(query_terms(text))

    def order(fact: dict[str, Any]) -> tuple[bool, bool, float]:
        words = set(query_terms(f"{fact['predicate'].replace('_', ' ')} {fact['object']}"))
        return (fact["predicate"] != "name", not (words & terms), -fact["valid_from"])

    return sorted(facts, key=order)


def user_model_block(
    peer: str,
    *,
    facts: Iterable[dict[str, Any]] = (),
    answer: str | None = None,
    answer_heading: str = "What matters now",
    observations: Iterable[dict[str, Any]] = (),
    budget: int,
) -> ContextBlock | None:
    """The block for one peer, cut line by line to fit `budget` tokens (tags included); None if empty."""
    lines: list[str] = []

    def fits(candidate: list[str]) -> bool:
        return block_tokens(ContextBlock(tag=TAG, text="\n".join(candidate))) <= budget

    def add(line: str) -> bool:
        if fits([*lines, line]):
            lines.append(line)
            return True
        return False

    fact_lines = [f"- {f['predicate'].replace('_', ' ')}: {f['object']}" for f in facts]
    if fact_lines and add(f"Facts about {peer} (current values):"):
        for line in fact_lines:
            if not add(line):
                break
    if answer and add(f"{answer_heading}:"):
        if not add(answer):
            room = budget - block_tokens(ContextBlock(tag=TAG, text="\n".join(lines))) - 2
            if room > 8:
                lines.append(truncate(answer, room))
    obs_lines = [f"- {o['content']} ({o['kind']}, {o['confidence']:.1f})" for o in observations]
    if obs_lines and add(f"Observations about {peer}:"):
        for line in obs_lines:
            if not add(line):
                break
    while lines and lines[-1].endswith(":"):
        lines.pop()
    if not lines:
        return None
    return ContextBlock(tag=TAG, text="\n".join(lines), layer="identity", priority=PRIORITY)
