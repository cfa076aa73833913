"""The `user-model` block: hard facts, the dialectic's answer and observations, within a token budget."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from thoth_core import ContextBlock
from thoth_core.budget import block_tokens, truncate
from thoth_core.words import word_stems

TAG = "user-model"
PRIORITY = 70
OTHER_FACTS = 10  # facts unrelated to the message that still come along


def relevant_facts(facts: list[dict[str, Any]], text: str, *, others: int = OTHER_FACTS) -> list[dict[str, Any]]:
    """Facts for a message: the name, those sharing a stem with it, then at most `others` of the rest (newest)."""
    stems = word_stems(text)

    def relevant(fact: dict[str, Any]) -> bool:
        return fact["predicate"] == "name" or bool(
            stems & word_stems(f"{fact['predicate'].replace('_', ' ')} {fact['object']}")
        )

    ordered = sorted(facts, key=lambda f: (f["predicate"] != "name", not relevant(f), -f["valid_from"]))
    chosen = [f for f in ordered if relevant(f)]
    return chosen + [f for f in ordered if not relevant(f)][:others]


def fact_label(fact: dict[str, Any], peer: str) -> str:
    """`predicate: object` for the peer's own facts, `Subject, predicate: object` for another entity's."""
    label = f"{fact['predicate'].replace('_', ' ')}: {fact['object']}"
    return label if fact.get("subject", peer) == peer else f"{fact['subject']}, {label}"


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

    facts = list(facts)
    own = [f"- {fact_label(f, peer)}" for f in facts if f.get("subject", peer) == peer]
    others = [f"- {fact_label(f, peer)}" for f in facts if f.get("subject", peer) != peer]
    for heading, fact_lines in (
        (f"Facts about {peer} (current values):", own),
        ("Facts about people and things in this message (and one hop from them):", others),
    ):
        if fact_lines and add(heading):
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
