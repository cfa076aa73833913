"""Plugin hosting in-process: attribution, result shapes, deadlines, registries and their order."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from thoth_core import Command, ContextBlock, Turn, hookimpl
from thoth_core._calls import call_each


class Impostor:
    LAYER = "identity"

    @hookimpl
    def pre_spawn_context(self):
        return [
            ContextBlock("claim", "I am someone else", plugin="procedural"),
            ContextBlock("own", "mine", layer="episodic"),
        ]


class Sloppy:
    @hookimpl
    async def pre_spawn_context(self):
        return ["not a block", ContextBlock("fine", "a real block")]


async def context(runtime):
    session = await runtime.session(peer="ann", thread="t")
    return await runtime.context(Turn("hi", "ann", "t"), session)


async def test_blocks_are_attributed_to_the_plugin_that_returned_them(make_runtime):
    assembly = await context(make_runtime({"impostor": Impostor()}))
    assert sorted((b.plugin, b.layer, b.tag) for b in assembly.blocks) == [
        ("impostor", "episodic", "own"),
        ("impostor", "identity", "claim"),
    ]


async def test_results_that_are_not_blocks_are_logged_and_skipped(make_runtime, caplog):
    with caplog.at_level(logging.ERROR):
        assembly = await context(make_runtime({"sloppy": Sloppy()}))
    assert [(b.plugin, b.tag) for b in assembly.blocks] == [("sloppy", "fine")]
    assert "plugin sloppy: pre_spawn_context returned a list holding str (1 of 2 items)" in caplog.text
    assert [(c.plugin, c.status) for c in assembly.calls] == [("sloppy", "bad-result")]


class Declared:
    DEADLINE = 0.3


def test_deadline_precedence_config_then_module_then_default(make_runtime):
    runtime = make_runtime(
        {"declared": Declared(), "plain": object()},
        config={"thoth": {"deadline": 1.25}, "plugins": {"configured": {"deadline": 0.7}}},
    )
    runtime.register(Declared(), name="configured")
    assert (runtime.deadline_for("configured"), runtime.deadline_for("declared"), runtime.deadline_for("plain")) == (
        0.7,
        0.3,
        1.25,
    )


class Blocker:
    DEADLINE = 0.2

    def __init__(self) -> None:
        self.release = threading.Event()
        self.finished = False

    @hookimpl
    def pre_spawn_context(self):
        self.release.wait(30)
        self.finished = True


async def test_a_blocking_sync_plugin_neither_stalls_the_loop_nor_pins_exit(make_runtime):
    blocker = Blocker()
    runtime = make_runtime({"blocker": blocker})
    ticks = 0

    async def tick():
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.ensure_future(tick())
    assembly = await context(runtime)
    ticker.cancel()
    assert [c.status for c in assembly.calls] == ["timeout"]
    assert not blocker.finished, "the context waited for the blocked plugin instead of its 0.2 s deadline"
    assert ticks >= 5, "the event loop was stalled by a sync plugin"
    workers = [t for t in threading.enumerate() if t.name == "thoth-plugin"]
    assert workers and all(t.daemon for t in workers)
    blocker.release.set()


class Shadow:
    """Registers a model under a built-in's name."""

    def __init__(self, label: str) -> None:
        self.label = label

    @hookimpl
    def register_models(self, register):
        register("replay", self.label)


class ShadowFirst(Shadow):
    @hookimpl(tryfirst=True)
    def register_models(self, register):
        register("replay", self.label)


def test_a_registry_keeps_the_last_registration_and_tryfirst_replaces_a_builtin(make_runtime):
    runtime = make_runtime({"first": ShadowFirst("tryfirst"), "late": Shadow("late")})
    assert runtime.registry("register_models")["replay"] == "tryfirst"
    runtime = make_runtime({"late": Shadow("late")})
    assert runtime.registry("register_models")["replay"] == "late"


class SlowProvider:
    """A model provider whose construction takes a while, so threads asking first overlap."""

    @hookimpl
    def register_models(self, register):
        def build(runtime, options):
            time.sleep(0.05)
            return object()

        register("slow", build)


def test_threads_asking_for_the_model_at_once_share_one_provider(make_runtime):
    runtime = make_runtime({"slow": SlowProvider()}, config={"thoth": {"model": "slow"}})
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(runtime.model())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8 and len({id(model) for model in seen}) == 1


class SlowRegistry:
    """Registers a provider slowly: a thread reading the registry is still at it when another plugin registers."""

    def __init__(self) -> None:
        self.reading = threading.Event()

    @hookimpl
    def register_models(self, register):
        self.reading.set()
        time.sleep(0.2)
        register("slow", lambda runtime, options: object())


class NamedProvider:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def register_models(self, register):
        register(self.name, lambda runtime, options: object())


def test_a_registry_read_while_a_plugin_registers_is_not_kept_without_it(make_runtime):
    slow = SlowRegistry()
    runtime = make_runtime({"slow": slow})
    runtime.register(NamedProvider("early"), name="early")  # the registry read at start-up is no longer kept
    slow.reading.clear()
    reader = threading.Thread(target=lambda: runtime.models)  # as a plugin's warm-up thread asks for the model
    reader.start()
    assert slow.reading.wait(5)
    runtime.register(NamedProvider("late"), name="late")
    reader.join()
    assert {"slow", "early", "late"} <= set(runtime.models)


class BrokenCommands:
    @hookimpl
    def register_commands(self, register):
        raise RuntimeError("no commands today")


class MoreCommands:
    @hookimpl
    def register_commands(self, register):
        register(Command("ping", "answer pong", lambda **_: "pong"))


async def test_a_failing_registration_does_not_hide_the_others(make_runtime, caplog):
    runtime = make_runtime({"broken": BrokenCommands(), "more": MoreCommands()})
    with caplog.at_level(logging.ERROR):
        result = await runtime.turn("/ping", peer="ann", thread="t")
    assert result.reply.text == "pong" and "help" in runtime.commands
    assert "plugin broken: register_commands failed: RuntimeError: no commands today" in caplog.text


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    @hookimpl
    async def layer_status(self, peer):
        self.calls += 1
        return {"layer": "episodic", "episodes": len(peer)}


class Failing:
    @hookimpl
    def layer_status(self):
        raise ValueError("disk on fire")


async def test_call_each_reports_each_plugin_on_its_own(make_runtime):
    counter = Counter()
    runtime = make_runtime({"counter": counter, "failing": Failing()})
    outcomes = await call_each(runtime.pm, "layer_status", {"workspace": "default", "peer": "ann", "runtime": runtime})
    summary = {plugin: (result, call.status, call.error) for plugin, result, call in outcomes}
    assert summary == {
        "counter": ({"layer": "episodic", "episodes": 3}, "ok", None),
        "failing": (None, "error", "ValueError: disk on fire"),
    }
    assert await runtime.status(peer="ann") == [{"layer": "episodic", "episodes": 3, "plugin": "counter"}]


def test_storage_migrates_once_in_order(tmp_path):
    from thoth_core.storage import connect, migrate

    steps = ["CREATE TABLE a (x INTEGER)", lambda db: db.execute("INSERT INTO a VALUES (1)")]
    db = connect(tmp_path / "deep" / "x.db", rows=True)
    migrate(db, steps)
    migrate(db, steps)  # nothing new to apply
    assert [tuple(r) for r in db.execute("SELECT x FROM a")] == [(1,)]
    assert db.execute("PRAGMA user_version").fetchone()[0] == 2
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


MIGRATING_CHILD = """
import sys, time
from pathlib import Path
from thoth_core.storage import connect, migrate

def add_column(db):
    db.execute("ALTER TABLE a ADD COLUMN y INTEGER")  # fails if a step ran twice
    db.execute("INSERT INTO a (x) VALUES (2)")

start = float(sys.argv[2])
while time.time() < start:
    pass
db = connect(Path(sys.argv[1]))
migrate(db, ["CREATE TABLE a (x INTEGER); INSERT INTO a (x) VALUES (1)", add_column])
print(db.execute("SELECT count(*) FROM a").fetchone()[0])
"""


def test_processes_opening_one_new_file_at_once_apply_each_migration_once(tmp_path):
    import subprocess
    import sys
    import time

    start = time.time() + 1.0
    children = [
        subprocess.Popen(
            [sys.executable, "-c", MIGRATING_CHILD, str(tmp_path / "shared.db"), str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    results = [child.communicate(timeout=60) for child in children]
    assert [child.returncode for child in children] == [0] * 4, [err for _, err in results]
    assert [out.strip() for out, _ in results] == ["2"] * 4


async def test_doctor_prints_each_plugins_checks_and_names_a_plugin_whose_checks_fail(make_runtime):
    from thoth_core import hookimpl
    from thoth_core.doctor import diagnose

    class Server:
        @hookimpl
        def doctor_checks(self, runtime):
            return [(True, "server: reachable"), (False, "server: 401, the key was refused")]

    class Broken:
        @hookimpl
        def doctor_checks(self, runtime):
            raise RuntimeError("boom")

    lines: list[str] = []
    problems = await diagnose(make_runtime({"server": Server(), "broken": Broken()}), echo=lines.append)
    assert "ok  server: reachable" in lines and "BAD server: 401, the key was refused" in lines
    assert any(line.startswith("BAD plugin broken: its checks failed: ") and "boom" in line for line in lines)
    assert problems >= 2


class GivesUpLate:
    """Returns nothing once past its own deadline (as episodic's related block does)."""

    @hookimpl
    def layer_status(self):
        time.sleep(0.3)


class HogsTheLoop:
    @hookimpl
    async def layer_status(self):
        time.sleep(0.5)  # blocks the event loop: the deadline's timer fires only after the other call has returned
        return {"layer": "working"}


async def test_a_call_that_gave_nothing_past_its_deadline_is_a_timeout_though_the_loop_saw_it_late(make_runtime):
    runtime = make_runtime({"late": GivesUpLate(), "hog": HogsTheLoop()})
    kwargs = {"workspace": "default", "peer": "ann", "runtime": runtime}
    outcomes = await call_each(runtime.pm, "layer_status", kwargs, deadline_for=lambda _name: 0.2)
    status = {plugin: (result, call.status) for plugin, result, call in outcomes}
    assert status["late"] == (None, "timeout")  # counted as missing context, not "ok": its thread ran past 0.2 s
    assert status["hog"] == (None, "blocked-loop")  # it held the loop 0.5 s in one step, past its deadline
