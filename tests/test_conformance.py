"""The conformance kit: `check_layer_plugin` passes a well-behaved layer and fails each kind of bad one."""

from __future__ import annotations

import asyncio

import pytest

from thoth_core import ContextBlock, hookimpl
from thoth_core.testing import check_layer_plugin


class NotesLayer:
    """A small, well-behaved layer: remembers what each peer said and shows it only to them."""

    LAYER = "episodic"

    def __init__(self) -> None:
        self.notes: dict[tuple[str, str], list[tuple[str, str]]] = {}

    def visible(self, workspace: str, peer: str) -> list[str]:
        """The notes this peer may see."""
        return [text for _, text in self.notes.get((workspace, peer), [])]

    @hookimpl
    def post_turn_write(self, turn):
        self.notes.setdefault((turn.workspace, turn.peer), []).append((turn.thread, turn.text))

    @hookimpl
    def pre_spawn_context(self, turn):
        notes = self.visible(turn.workspace, turn.peer)[-3:]
        return ContextBlock("notes", "\n".join(notes)) if notes else None

    @hookimpl
    def forget(self, peer, thread, workspace):
        held = self.notes.get((workspace, peer), [])
        kept = [note for note in held if thread is not None and note[0] != thread]
        self.notes[(workspace, peer)] = kept
        return {"notes": len(held) - len(kept)} if len(held) > len(kept) else None


class LeakyLayer(NotesLayer):
    """Shows every peer's notes to everyone."""

    def visible(self, workspace, peer):
        return [text for notes in self.notes.values() for _, text in notes]


class AmnesiacLayer(NotesLayer):
    """Answers `forget` but keeps everything."""

    @hookimpl
    def forget(self, peer, thread, workspace):
        return {"notes": 0}


class ForgetfulLayer(NotesLayer):
    """Keeps nothing, so it never shows anything (and passes the isolation checks vacuously)."""

    @hookimpl
    def post_turn_write(self, turn):
        pass


class Gossip:
    """A plain plugin (no layer) that repeats the last thing anyone said, in everyone's context."""

    def __init__(self) -> None:
        self.last = ""

    @hookimpl
    def post_turn_write(self, turn):
        self.last = turn.text

    @hookimpl
    def pre_spawn_context(self, turn):
        return ContextBlock("gossip", self.last) if self.last else None


class GreedyLayer(NotesLayer):
    """Pads its block far past the layer budget."""

    @hookimpl
    def pre_spawn_context(self, turn):
        notes = self.visible(turn.workspace, turn.peer)
        return ContextBlock("notes", "\n".join(notes) + " filler" * 500) if notes else None


class SlowLayer(NotesLayer):
    """Takes longer than its deadline."""

    DEADLINE = 0.1

    @hookimpl
    async def pre_spawn_context(self, turn):
        await asyncio.sleep(0.4)
        return NotesLayer.pre_spawn_context(self, turn)


async def test_a_well_behaved_layer_passes(make_runtime):
    runtime = make_runtime({"notes": NotesLayer()}, config={"budget": {"layers": {"episodic": 300}}})
    await check_layer_plugin(runtime, "notes")


async def test_the_check_really_exercises_the_plugin(make_runtime):
    layer = NotesLayer()
    runtime = make_runtime({"notes": layer})
    await check_layer_plugin(runtime, "notes")
    assert layer.notes, "the check wrote no turns through the plugin"
    assert all(not notes for (_, peer), notes in layer.notes.items() if peer == "alice")


async def test_recall_is_checked_when_asked(make_runtime):
    await check_layer_plugin(make_runtime({"notes": NotesLayer()}), "notes", expect_recall=True)
    await check_layer_plugin(make_runtime({"notes": ForgetfulLayer()}), "notes")
    with pytest.raises(AssertionError, match="does not show alice's data in her own new thread"):
        await check_layer_plugin(make_runtime({"notes": ForgetfulLayer()}), "notes", expect_recall=True)


async def test_a_leak_through_another_plugins_block_fails_the_check(make_runtime):
    runtime = make_runtime({"notes": NotesLayer(), "gossip": Gossip()})
    with pytest.raises(AssertionError, match=r"gossip:gossip leaked alice's data into bob's context"):
        await check_layer_plugin(runtime, "notes")


@pytest.mark.parametrize(
    ("plugin", "failure"),
    [
        (LeakyLayer, "leaked alice's data into bob's context"),
        (AmnesiacLayer, "still shows alice's data after forget"),
        (GreedyLayer, "more context than its budget allows"),
        (SlowLayer, "pre_spawn_context timeout"),
    ],
    ids=["leaks-across-peers", "ignores-forget", "blows-its-budget", "too-slow"],
)
async def test_a_bad_layer_fails_the_check(make_runtime, plugin, failure):
    runtime = make_runtime({"notes": plugin()}, config={"budget": {"layers": {"episodic": 300}}})
    with pytest.raises(AssertionError, match=failure):
        await check_layer_plugin(runtime, "notes")
