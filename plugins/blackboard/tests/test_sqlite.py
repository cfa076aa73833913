"""The SQLite board (the default): expiry, sharing one file between boards and processes, the CLI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import thoth_blackboard.plugin as plugin
from thoth_blackboard.sqlite_board import SqliteBoard

from thoth_core.testing import run_thoth


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


async def test_a_board_expires_ttl_seconds_after_its_last_publish(tmp_path):
    clock = Clock()
    board = SqliteBoard(tmp_path / "board.db", ttl=60, clock=clock)
    await board.publish("task:1:status", "queued")
    clock.now += 50
    await board.publish("task:2:status", "queued")  # a publish renews the whole board
    clock.now += 50
    assert [s.key for s in await board.list("task:")] == ["task:1:status", "task:2:status"]
    clock.now += 11
    assert await board.get("task:1:status") is None and await board.list() == []
    reader = await board.subscribe("task:*", after="0")
    await board.publish("task:3:status", "new")
    [signal] = await collect(reader, 1)
    assert signal.key == "task:3:status"  # the expired log is gone too
    await reader.close()
    await board.close()


async def test_a_persistent_board_never_expires(tmp_path):
    clock = Clock()
    board = SqliteBoard(tmp_path / "board.db", ttl=None, clock=clock)
    await board.publish("index:status", "built")
    clock.now += 10 * 365 * 86_400
    assert (await board.get("index:status")).value == "built"
    await board.close()


async def test_boards_in_one_file_are_separate_and_ids_keep_growing(tmp_path):
    one = SqliteBoard(tmp_path / "board.db", name="T1")
    two = SqliteBoard(tmp_path / "board.db", name="T2")
    first = await one.publish("index:status", "team one")
    assert await two.get("index:status") is None and await two.list() == []
    assert await one.clear() == 1
    second = await one.publish("index:status", "again")
    assert int(second.id) > int(first.id)  # a cursor taken before the clear stays valid
    await one.close()
    await two.close()


async def test_a_subscriber_sees_what_another_connection_publishes(tmp_path):
    reader_board = SqliteBoard(tmp_path / "board.db", poll=0.02)
    writer_board = SqliteBoard(tmp_path / "board.db")
    subscription = await reader_board.subscribe("task:*")
    waiting = asyncio.create_task(collect(subscription, 2))
    await asyncio.sleep(0.05)  # the reader is polling, not woken by this connection
    await writer_board.publish("task:1:status", "running")
    await writer_board.publish("index:status", "ignored")
    await writer_board.publish("task:1:status", "done")
    assert [s.value for s in await waiting] == ["running", "done"]
    await subscription.close()
    await reader_board.close()
    await writer_board.close()


async def test_the_default_backend_is_sqlite_under_the_home(make_runtime):
    runtime = make_runtime({"blackboard": plugin})
    board = plugin.board_for(runtime)
    assert isinstance(board, SqliteBoard) and board.path == runtime.home / "blackboard" / "board.db"
    memory = make_runtime({"blackboard": plugin}, config={"plugins": {"blackboard": {"backend": "memory"}}})
    assert not isinstance(plugin.board_for(memory), SqliteBoard)


def board_env(tmp_path: Path) -> dict[str, str | None]:
    return {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "blackboard", "THOTH_CONFIG": None}


def test_put_in_one_process_get_in_another(tmp_path):
    env = board_env(tmp_path)
    put = run_thoth("board", "put", "task:3:status", "queued", "--publisher", "ann", cwd=tmp_path, env=env)
    assert put.returncode == 0, put.stderr
    got = run_thoth("board", "get", "task:3:status", cwd=tmp_path, env=env)
    assert (got.returncode, got.stdout.strip()) == (0, "queued"), got.stderr
    listed = run_thoth("board", "ls", "task:", "--json", cwd=tmp_path, env=env)
    assert [(s["key"], s["publisher"]) for s in json.loads(listed.stdout)] == [("task:3:status", "ann")]
    assert (tmp_path / "home" / "blackboard" / "board.db").exists()


def test_watch_follows_another_process_on_the_sqlite_board(tmp_path):
    env = board_env(tmp_path)
    thoth = Path(sys.executable).with_name("thoth")
    watcher = subprocess.Popen(
        [str(thoth), "board", "watch", "task:*", "--count", "1", "--timeout", "30"],
        cwd=tmp_path,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = ""
    for _ in range(60):  # publish until the watcher has subscribed and printed one signal
        assert run_thoth("board", "put", "task:5:status", "running", cwd=tmp_path, env=env).returncode == 0
        try:
            out, _ = watcher.communicate(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            continue
    assert watcher.returncode == 0
    assert json.loads(out.splitlines()[0])["value"] == "running"


def test_board_without_a_subcommand_shows_its_help(tmp_path):
    shown = run_thoth("board", cwd=tmp_path, env=board_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert "Read, write and watch the shared blackboard." in shown.stdout
    assert all(name in shown.stdout for name in ("get", "put", "ls", "watch"))


async def collect(subscription, n, timeout=5.0):
    got = []

    async def read():
        async for signal in subscription:
            got.append(signal)
            if len(got) == n:
                return

    await asyncio.wait_for(read(), timeout)
    return got
