"""Fitting context blocks and history into token budgets, reporting what was cut.

Token counts are an estimate that is additive over whitespace: a word costs one token plus
one per eight characters, any other visible character one. Because blocks are joined with
blank lines, the count of the assembled prompt is exactly the sum of its blocks' counts,
so the budget check is exact for the estimate and errs high against real tokenizers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from .types import ContextBlock, Cut, Message, PluginCall

_PIECE = re.compile(r"\w+|[^\w\s]")
MIN_USEFUL_TOKENS = 16


def count_tokens(text: str) -> int:
    """Estimated tokens of a text."""
    return sum(
        1 + (len(m.group()) >> 3) if m.group()[0].isalnum() or m.group()[0] == "_" else 1 for m in _PIECE.finditer(text)
    )


def truncate(text: str, max_tokens: int) -> str:
    """The longest prefix of text that costs at most max_tokens."""
    used, end = 0, 0
    for m in _PIECE.finditer(text):
        piece = m.group()
        cost = 1 + (len(piece) >> 3) if piece[0].isalnum() or piece[0] == "_" else 1
        if used + cost > max_tokens:
            break
        used, end = used + cost, m.end()
    return text[:end]


def block_tokens(block: ContextBlock) -> int:
    """Tokens of a block as rendered into the prompt, tags included."""
    return count_tokens(block.render())


@dataclass
class Assembly:
    """The system prompt for one turn: kept blocks in order, what was cut, how plugins did."""

    blocks: list[ContextBlock]
    cuts: list[Cut] = field(default_factory=list)
    calls: list[PluginCall] = field(default_factory=list)
    budget: int = 0

    @property
    def system(self) -> str:
        """The assembled system prompt text."""
        return "\n\n".join(block.render() for block in self.blocks)

    @property
    def tokens(self) -> int:
        """Estimated tokens of the system prompt."""
        return sum(block_tokens(b) for b in self.blocks)


def _fit(blocks: list[ContextBlock], limit: int, reason: str, cuts: list[Cut]) -> list[ContextBlock]:
    """Keep blocks in priority order within limit, truncating the one that crosses it."""
    kept, used = [], 0
    for block in sorted(blocks, key=_priority_order):
        cost = block_tokens(block)
        if used + cost <= limit:
            kept.append(block)
            used += cost
            continue
        overhead = block_tokens(replace(block, text=""))
        room = limit - used - overhead
        text = truncate(block.text, room) if room >= MIN_USEFUL_TOKENS else ""
        if text:
            kept.append(replace(block, text=text))
            used += block_tokens(kept[-1])
        cuts.append(Cut(block.plugin, block.layer, block.tag, cost, block_tokens(kept[-1]) if text else 0, reason))
    return kept


def _priority_order(block: ContextBlock) -> tuple[int, str, str]:
    return (-block.priority, block.plugin, block.tag)


def prompt_order(block: ContextBlock) -> tuple[bool, int, str, str]:
    """Stable blocks first (cacheable prefix), then by priority."""
    return (not block.stable, *_priority_order(block))


def assemble(blocks: list[ContextBlock], *, total: int, layers: dict[str, int]) -> Assembly:
    """Fit blocks into the per-layer budgets, then the total; never exceeds either."""
    cuts: list[Cut] = []
    by_layer: dict[str, list[ContextBlock]] = {}
    for block in blocks:
        by_layer.setdefault(block.layer, []).append(block)
    within_layers: list[ContextBlock] = []
    for layer, members in by_layer.items():
        limit = layers.get(layer)
        within_layers += members if limit is None else _fit(members, limit, f"layer budget {layer}={limit}", cuts)
    kept = _fit(within_layers, total, f"total budget {total}", cuts)
    return Assembly(blocks=sorted(kept, key=prompt_order), cuts=cuts, budget=total)


def trim_history(messages: list[Message], budget: int) -> list[Message]:
    """The most recent messages that fit the budget, starting with a user message."""
    kept: list[Message] = []
    used = 0
    for message in reversed(messages):
        cost = count_tokens(message.content) + 4
        if used + cost > budget:
            break
        kept.append(message)
        used += cost
    kept.reverse()
    while kept and kept[0].role != "user":
        kept.pop(0)
    return kept
