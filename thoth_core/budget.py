"""Fitting context blocks and history into token budgets, reporting what was cut.

Token counts are an estimate that is additive over whitespace: a word costs one token plus
one per eight characters, any other visible character one. Because blocks are joined with
blank lines, the count of the assembled prompt is exactly the sum of its blocks' counts,
so the budget check is exact for the estimate and errs high against real tokenizers.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from functools import lru_cache
from typing import Any

from .types import ContextBlock, Cut, Message, PluginCall, quoted

_PIECE = re.compile(r"\w+|[^\w\s]")
_LONG_WORD = re.compile(r"\w{8,}")  # the words that cost more than one token
MIN_USEFUL_TOKENS = 16
PER_PLUGIN = 800  # tokens of a plugin whose layer has no budget (`[budget] per_plugin`)


@lru_cache(maxsize=1024)  # a turn's assembly counts each rendered block several times
def count_tokens(text: str) -> int:
    """Estimated tokens of a text."""
    return len(_PIECE.findall(text)) + sum(len(word) >> 3 for word in _LONG_WORD.findall(text))


def truncate(text: str, max_tokens: int) -> str:
    """The longest prefix of text that costs at most max_tokens."""
    used, end = 0, 0
    for m in _PIECE.finditer(text):
        piece = m.group()
        cost = 1 + (len(piece) >> 3)  # a mark is one character: one token
        if used + cost > max_tokens:
            break
        used, end = used + cost, m.end()
    return text[:end]


def truncate_quoted(text: str, max_tokens: int) -> str:
    """The longest prefix of text (whole pieces) that costs at most max_tokens once quoted, as a block renders it."""
    ends = [m.end() for m in _PIECE.finditer(text)]
    low, high = 0, len(ends)  # pieces kept; the quoted cost never falls as pieces are added
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(quoted(text[: ends[middle - 1]])) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[: ends[low - 1]] if low else ""


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
    tools: list[dict[str, Any]] = field(default_factory=list)  # the model's tool calls: name, plugin, tokens, ms

    @property
    def system(self) -> str:
        """The assembled system prompt text."""
        return "\n\n".join(block.render() for block in self.blocks)

    @property
    def tokens(self) -> int:
        """Estimated tokens of the system prompt."""
        return sum(block_tokens(b) for b in self.blocks)

    def as_dict(self) -> dict[str, Any]:
        """The report `thoth context --json` prints: blocks with their tokens, cuts, plugin calls, tool calls."""
        return {
            "blocks": [dict(asdict(b), tokens=block_tokens(b)) for b in self.blocks],
            "cut": [asdict(c) for c in self.cuts],
            "calls": [asdict(c) for c in self.calls],
            "tokens": self.tokens,
            "budget": self.budget,
            "tools": self.tools,
        }


def _fit(
    blocks: list[ContextBlock], limit: int, reason: str, cuts: list[Cut], *, floors: bool = False
) -> list[ContextBlock]:
    """Keep blocks in priority order within limit, truncating the ones that cross it.

    With `floors`, each block is sure of `limit / (2 * blocks)` tokens (or all of it, if smaller):
    a huge block ahead of its siblings is cut to leave them that much, instead of pushing them out.
    """
    ordered = sorted(blocks, key=_priority_order)
    floor = limit // (2 * len(ordered)) if floors and ordered else 0
    reserved = [min(block_tokens(block), floor) for block in ordered]
    kept, used = [], 0
    for index, block in enumerate(ordered):
        cost = block_tokens(block)
        room = limit - sum(reserved[index + 1 :])
        if used + cost <= room:
            kept.append(block)
            used += cost
            continue
        overhead = block_tokens(replace(block, text=""))
        room = room - used - overhead
        text = truncate_quoted(block.text, room) if room >= MIN_USEFUL_TOKENS else ""
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


def assemble(
    blocks: list[ContextBlock], *, total: int, layers: dict[str, int], per_plugin: int = PER_PLUGIN
) -> Assembly:
    """Fit blocks into the per-layer budgets, then the total; never exceeds either.

    Within a layer every block keeps a floor (see `_fit`). A plugin whose layer has no budget
    (a third-party plugin without `LAYER`) gets `per_plugin` tokens, so none can take the total.
    """
    cuts: list[Cut] = []
    groups: dict[tuple[str, str], list[ContextBlock]] = {}
    for block in blocks:
        budgeted = block.layer in layers
        groups.setdefault((block.layer, "" if budgeted else block.plugin), []).append(block)
    within: list[ContextBlock] = []
    for (layer, plugin), members in groups.items():
        if plugin:
            within += _fit(members, per_plugin, f"plugin share {plugin}={per_plugin}", cuts, floors=True)
        else:
            within += _fit(members, layers[layer], f"layer budget {layer}={layers[layer]}", cuts, floors=True)
    kept = _fit(within, total, f"total budget {total}", cuts)
    return Assembly(blocks=sorted(kept, key=prompt_order), cuts=cuts, budget=total)


def fit_message(text: str, budget: int) -> tuple[str, Cut | None]:
    """The user's message within its budget: cut at the end with a notice the model sees, and the cut."""
    tokens = count_tokens(text)
    if tokens <= budget:
        return text, None
    notice = f"\n\n[The rest of this message was cut: it had {tokens} tokens, the limit is {budget}.]"
    kept = truncate(text, max(0, budget - count_tokens(notice))) + notice
    return kept, Cut("core", "message", "message", tokens, count_tokens(kept), f"message budget {budget}")


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
