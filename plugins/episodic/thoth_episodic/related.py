"""The `related-episodes` block: past episodes offered to a turn, none twice to one session.

By default only a thread's first turn gets the block; with `[plugins.episodic]
related_every_turn = true` every turn does (ADR 002: relevant episodes on every invocation).
The ids offered are kept in the session's scratch (`episodic.shown`) and never offered again in
that session, nor are the episodes of turns already in this session's transcript (the history
carries them). The block holds only lines that fit the episodic layer's token budget, and when the
recall ran past the layer's deadline (the core has dropped the block) nothing counts as shown.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from thoth_core import ContextBlock, count_tokens

from .memory import render_hit

if TYPE_CHECKING:
    from thoth_core.types import Session, Turn

    from .memory import EpisodicMemory
    from .records import Hit

SHOWN_KEY = "episodic.shown"  # session scratch: ids of the episodes this session was offered
TAG = "related-episodes"
MAX_ASKED = 200  # at most this many hits are asked for to find related_k unseen ones


def layer_budget(memory: EpisodicMemory) -> int:
    """Tokens the episodic layer may put in the prompt (`[budget.layers] episodic`, else the per-plugin share)."""
    config = memory.runtime.config
    budget = config.layer_budgets.get("episodic")
    return int(budget if budget is not None else config.get("budget.per_plugin"))


def fitting(hits: list[Hit], budget: int) -> list[Hit]:
    """The leading hits whose rendered block stays within budget tokens."""
    kept: list[Hit] = []
    for hit in hits:
        text = "\n".join(render_hit(h) for h in [*kept, hit])
        if count_tokens(ContextBlock(tag=TAG, text=text).render()) > budget:
            break
        kept.append(hit)
    return kept


def related_block(memory: EpisodicMemory, turn: Turn, session: Session) -> ContextBlock | None:
    """The block of up to `related_k` related episodes this session has not been offered yet."""
    settings = memory.settings
    if not memory.recalls(session):
        return None
    started = time.monotonic()
    memory.warm_up()  # when the session began without needing it (its history went since)
    shown: list[str] = session.scratch.setdefault(SHOWN_KEY, [])
    own = {str(entry.get("turn_id")) for entry in session.transcript if entry.get("turn_id")}
    asked = min(settings.related_k + len(shown) + len(own), MAX_ASKED)
    hits = memory.recall(turn.text, workspace=session.workspace, peer=turn.peer, k=asked)
    seen = set(shown)
    fresh = [h for h in hits if h.episode.id not in seen and h.episode.turn_id not in own][: settings.related_k]
    kept = fitting(fresh, layer_budget(memory))
    if not kept or time.monotonic() - started > memory.runtime.deadline_for("episodic"):
        return None
    shown.extend(h.episode.id for h in kept)
    return ContextBlock(tag=TAG, text="\n".join(render_hit(h) for h in kept), layer="episodic", priority=40)
