"""`/layers`: L1-L5 in order with used/budget tokens, then every other plugin under its own name."""

from __future__ import annotations

from thoth_core import ContextBlock, hookimpl
from thoth_core.budget import block_tokens

BUDGETS = {"working": 500, "identity": 100, "episodic": 300, "procedural": 700, "reflection": 50}


class Working:
    LAYER = "working"

    @hookimpl
    def pre_spawn_context(self):
        return ContextBlock(tag="memory", text="Ann prefers short answers.")

    @hookimpl
    def layer_status(self):
        return {"layer": "working", "sessions": 4}


class Identity:
    LAYER = "identity"

    @hookimpl
    def pre_spawn_context(self, turn):
        return ContextBlock(tag="peer-card", text=f"{turn.peer} likes tea. " * 40)  # more than its budget

    @hookimpl
    def layer_status(self):
        return {"layer": "identity", "facts": 3}


class Board:
    """Like the blackboard: counted in the working budget, reports its own status."""

    LAYER = "working"

    @hookimpl
    def pre_spawn_context(self):
        return ContextBlock(tag="board", text="deploy frozen until Friday")

    @hookimpl
    def layer_status(self):
        return {"layer": "working", "signals": 2}


class Hello:
    """A third-party plugin outside the five layers."""

    @hookimpl
    def pre_spawn_context(self, session):
        session.scratch.pop("once", None)  # consumes state, as procedural's chosen /skill does
        return ContextBlock(tag="hello", text="Say hello.")

    @hookimpl
    def layer_status(self):
        return {"layer": "other", "greetings": 1}


def plugins():
    return {"working": Working(), "identity": Identity(), "board": Board(), "hello": Hello()}


def tokens(blocks, **where) -> int:
    return sum(block_tokens(b) for b in blocks if all(getattr(b, k) == v for k, v in where.items()))


async def test_layers_lists_l1_to_l5_then_other_plugins_with_used_and_budget(make_runtime):
    runtime = make_runtime(plugins(), config={"budget": {"layers": BUDGETS}}, replies=[{"reply": "ok"}])
    result = await runtime.turn("hi", peer="ann", thread="t")
    blocks = result.assembly.blocks
    out = (await runtime.turn("/layers", peer="ann", thread="t")).reply.text
    head, *lines = out.splitlines()
    assert "last turn of this thread" in head and f"{result.assembly.tokens}/6000" in head
    assert [line.split("  ")[0] for line in lines] == [
        "L1 working · Malkuth",
        "L2 identity · Binah",
        "L3 episodic · Chokmah",
        "L4 procedural · Yesod",
        "L5 reflection · Kether",
        "board",
        "hello",
    ]
    working, identity, episodic, _, reflection, board, hello = lines
    assert working == f"L1 working · Malkuth  {tokens(blocks, layer='working')}/500 tokens · sessions 4"
    assert "signals" not in working and tokens(blocks, plugin="board") > 0
    assert identity == f"L2 identity · Binah  {tokens(blocks, layer='identity')}/100 tokens · facts 3"
    assert 0 < tokens(blocks, layer="identity") <= 100  # cut to its budget: used is what was kept
    assert episodic == "L3 episodic · Chokmah  0/300 tokens · not installed"
    assert reflection == "L5 reflection · Kether  0/50 tokens · not installed"
    assert board == f"board  {tokens(blocks, plugin='board')} tokens (in L1 working's budget) · signals 2"
    assert hello == f"hello  {tokens(blocks, plugin='hello')} tokens · greetings 1"


async def test_layers_assembles_the_context_when_the_thread_had_no_turn_yet_without_touching_scratch(make_runtime):
    runtime = make_runtime(plugins(), config={"budget": {"layers": {"working": 40}}}, replies=[{"reply": "ok"}])
    await runtime.turn("hi", peer="ann", thread="other-thread")  # the last turn is another thread's
    session = await runtime.session(peer="ann", thread="t")
    session.scratch["once"] = "keep me"
    out = (await runtime.turn("/layers", peer="ann", thread="t")).reply.text
    assert "assembled now" in out.splitlines()[0]
    assert session.scratch == {"once": "keep me"}
    expected = block_tokens(ContextBlock("memory", "Ann prefers short answers.")) + block_tokens(
        ContextBlock("board", "deploy frozen until Friday")
    )
    assert f"L1 working · Malkuth  {expected}/40 tokens" in out
    assert "\nL2 identity · Binah  " in out and "/800 tokens · facts 3" in out  # the default budget where none is set
