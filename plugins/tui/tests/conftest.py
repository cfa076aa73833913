"""Small plugins the TUI tests drive: layer stand-ins, an approval queue, a feedback recorder, a gated model."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from thoth_tui import plugin as tui_plugin
from thoth_tui.app import ThothApp

from thoth_core import Command, ContextBlock, hookimpl


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""


class IdentityStandIn:
    """An identity layer: one small block and a fact count."""

    LAYER = "identity"

    @hookimpl
    async def pre_spawn_context(self, turn):
        return ContextBlock(tag="peer-card", text=f"{turn.peer} likes tea.")

    @hookimpl
    async def layer_status(self, peer):
        return {"layer": "identity", "facts": 3, "observations": 2}


class EpisodicStandIn:
    """An episodic layer whose block is too big for its budget, so the budget cuts it."""

    LAYER = "episodic"

    @hookimpl
    async def pre_spawn_context(self):
        return ContextBlock(tag="recalled-episodes", text=" ".join(f"episode{i}" for i in range(1000)))

    @hookimpl
    async def layer_status(self):
        return {"layer": "episodic", "episodes": 12}

    @hookimpl
    def register_commands(self, register):
        register(
            Command("recall", "search past episodes", lambda args, **_: f"recalled: {args or 'nothing'}", usage="QUERY")
        )


class Queue:
    """An approval queue like procedural's: items by id (about ann, unless told), decided by approve, reject or edit."""

    def __init__(self) -> None:
        self.items: dict[str, dict[str, Any]] = {}
        self.decisions: list[tuple[str, str, str, str | None]] = []

    def add(
        self, slug: str, body: str = "# Steps\n\n1. do it", flags: list[str] | None = None, *, peer: str = "ann"
    ) -> str:
        item_id = f"skill:{slug}"
        self.items[item_id] = {
            "id": item_id,
            "kind": "skill",
            "title": f"skill draft {slug}",
            "body": body,
            "workspace": "default",
            "peer": peer,
            "source": {"session": "s-123", "run_id": "r-9"},
            "flags": flags or [],
            "created_at": "2026-11-21T23:00:00Z",
        }
        return item_id

    @hookimpl
    async def approvals(self):
        return list(self.items.values())

    @hookimpl
    async def decide(self, item_id, decision, actor, text):
        if item_id not in self.items:
            return None
        self.decisions.append((item_id, decision, actor, text))
        if decision == "edit":
            self.items[item_id]["body"] = text
            return {"message": f"edited {item_id}"}
        del self.items[item_id]
        return {"message": f"{decision.rstrip('e')}ed {item_id}"}


class FeedbackRecorder:
    """Records reactions the way a layer's feedback hook receives them."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    @hookimpl
    async def feedback(self, kind, turn_id, text, actor, session):
        self.calls.append({"kind": kind, "turn_id": turn_id, "text": text, "actor": actor, "thread": session.thread})
        return {"message": f"noted {kind}"}


class SessionRecorder:
    """Records session starts and ends."""

    def __init__(self) -> None:
        self.ended: list[tuple[str, str]] = []

    @hookimpl
    async def session_end(self, session, reason):
        self.ended.append((session.thread, reason))


class GatedModel:
    """A model provider that waits for `release` before streaming its reply."""

    name = "gated"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def stream(self, request):
        await self.release.wait()
        for piece in ["**Done**", " waiting."]:
            yield piece


class Gate:
    """Registers the `gated` model provider."""

    def __init__(self) -> None:
        self.model = GatedModel()

    @hookimpl
    def register_models(self, register):
        register("gated", lambda runtime, options: self.model)


@pytest.fixture
def stand_ins():
    """The layer stand-ins, as plugins for make_runtime."""
    return {"identity": IdentityStandIn(), "episodic": EpisodicStandIn()}


@pytest.fixture
def queue():
    return Queue()


@pytest.fixture
def queue_factory():
    return Queue


@pytest.fixture
def recorder():
    return FeedbackRecorder()


@pytest.fixture
def sessions():
    return SessionRecorder()


@pytest.fixture
def gate():
    return Gate()


@pytest.fixture
def make_app(make_runtime):
    """Factory: a ThothApp on a test runtime with the tui plugin and the given plugins; ann owns the home (she decides
    approvals unless the test sets founders)."""

    def factory(
        plugins: dict[str, object] | None = None, *, peer: str = "ann", thread: str = "t1", **kwargs: Any
    ) -> ThothApp:
        config = kwargs.pop("config", None) or {}
        config = {**config, "thoth": {"owner": "ann", **config.get("thoth", {})}}
        runtime = make_runtime({"tui": tui_plugin, **(plugins or {})}, config=config, **kwargs)
        return ThothApp(runtime, peer=peer, thread=thread)

    return factory


async def settle(app: ThothApp, pilot) -> None:
    """Wait for running turns and a refresh."""
    await app.workers.wait_for_complete()
    await pilot.pause()


@pytest.fixture
def wait():
    return settle


async def type_and_send(app: ThothApp, pilot, text: str) -> None:
    """Put text in the message box (typing each key is slow) and press enter."""
    prompt = app.query_one("#prompt")
    prompt.value = text
    prompt.cursor_position = len(text)
    await pilot.press("enter")
    await settle(app, pilot)


@pytest.fixture
def send():
    return type_and_send
