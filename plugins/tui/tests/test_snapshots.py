"""Snapshot tests (pytest-textual-snapshot) of the main screens; `--snapshot-update` rewrites them."""

from __future__ import annotations

import pytest
from thoth_tui import plugin as tui_plugin
from thoth_tui.app import ThothApp

REPLY = (
    "## Plan\n\nHere is what I would do, **Ann**:\n\n"
    "1. check the logs\n2. restart the worker\n\n`systemctl restart worker`"
)


@pytest.fixture
def snap(snap_compare):
    """snap_compare with the prompt's cursor shown steadily: a blinking one is captured on or off by chance."""

    def compare(app: ThothApp, *, run_before, **kwargs) -> bool:
        async def steady(pilot) -> None:
            await run_before(pilot)
            for prompt in pilot.app.query("#prompt"):
                prompt.cursor_blink = False
            await pilot.pause()

        return snap_compare(app, run_before=steady, **kwargs)

    return compare


@pytest.fixture
def app_with(make_runtime):
    def factory(plugins=None, **kwargs) -> ThothApp:
        runtime = make_runtime({"tui": tui_plugin, **(plugins or {})}, **kwargs)
        return ThothApp(runtime, peer="ann", thread="t1")

    return factory


async def send(pilot, text: str) -> None:
    pilot.app.query_one("#prompt").value = text
    await pilot.press("enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def fixed_timings(pilot) -> None:
    """Plugin call times vary run to run; pin them so the panel renders the same every time."""
    for number, call in enumerate(pilot.app.runtime.last.assembly.calls, start=1):
        call.seconds = number * 0.012
    await pilot.app.refresh_layers()
    await pilot.pause()


def test_chat_after_a_streamed_reply_80x24(snap, app_with):
    app = app_with(replies=[{"reply": REPLY}])

    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await send(pilot, "the worker is stuck, what now?")

    assert snap(app, terminal_size=(80, 24), run_before=run_before)


def test_layers_panel_after_a_turn(snap, app_with, stand_ins, queue):
    queue.add("weekly-report")
    app = app_with({**stand_ins, "queue": queue}, replies=[{"reply": "Done."}])

    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await send(pilot, "hello")
        await fixed_timings(pilot)

    assert snap(app, terminal_size=(120, 30), run_before=run_before)


def test_approvals_view(snap, app_with, queue):
    queue.add(
        "deploy-checklist", body="# Deploy checklist\n\n1. freeze merges\n2. tag the release", flags=["injection"]
    )
    queue.add("release-notes")
    app = app_with({"queue": queue})

    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await pilot.press("f3")
        await pilot.pause()

    assert snap(app, terminal_size=(100, 30), run_before=run_before)


def test_model_missing_banner(snap, app_with):
    app = app_with(config={"thoth": {"model": ""}})

    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap(app, terminal_size=(80, 24), run_before=run_before)


def test_slash_completion(snap, app_with, stand_ins):
    app = app_with(stand_ins)

    async def run_before(pilot):
        await pilot.app.workers.wait_for_complete()
        await pilot.press(*"/re")
        await pilot.pause()

    assert snap(app, terminal_size=(80, 24), run_before=run_before)
