"""The blackboard plugin in a runtime: context block, /board, roster, persistence, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import thoth_blackboard.plugin as plugin
from thoth_blackboard.memory import InProcessBoard
from thoth_blackboard.roster import agent_ids

from thoth_core.testing import context_for


async def test_block_lists_only_subscribed_signals(make_runtime):
    runtime = make_runtime(
        {"blackboard": plugin}, config={"plugins": {"blackboard": {"agent": "scribe", "subscriptions": ["index:*"]}}}
    )
    board = plugin.board_for(runtime)
    await board.publish("index:status", "ready", publisher="indexer")
    await board.publish("agent:scribe:task", "summarise the thread")
    await board.publish("task:9:secret", "not for scribe")
    assembly = await context_for(runtime, "hi", peer="ann", thread="t")
    [block] = [b for b in assembly.blocks if b.tag == "blackboard"]
    assert "index:status = ready  (from indexer)" in block.text
    assert "agent:scribe:task = summarise the thread" in block.text
    assert "task:9" not in block.text


async def test_no_block_when_nothing_subscribed_is_set(make_runtime):
    runtime = make_runtime({"blackboard": plugin})
    assembly = await context_for(runtime, "hi", peer="ann", thread="t")
    assert [b for b in assembly.blocks if b.tag == "blackboard"] == []


async def test_board_slash_command(make_runtime):
    runtime = make_runtime({"blackboard": plugin})
    put = await runtime.turn("/board put task:1:status done", peer="ann", thread="t")
    assert put.reply.text == "published task:1:status = done"
    assert (await runtime.turn("/board get task:1:status", peer="ann", thread="t")).reply.text == "task:1:status = done"
    assert (await runtime.turn("/board ls task:", peer="ann", thread="t")).reply.text == "task:1:status = done"
    assert (await plugin.board_for(runtime).get("task:1:status")).publisher == "ann"


async def test_in_process_board_persists_when_asked(tmp_path):
    board = InProcessBoard(path=tmp_path / "board.json")
    await board.publish("index:status", "built")
    await board.close()
    again = InProcessBoard(path=tmp_path / "board.json")
    assert (await again.get("index:status")).value == "built"
    assert (await again.publish("index:status", "rebuilt")).id == "2"


def test_roster_ids_from_headings_lists_and_tables(tmp_path):
    roster = tmp_path / "AGENTS.md"
    roster.write_text(
        "# Agents\n\n## scribe — writes summaries\n- **researcher**: finds things\n"
        "| id | role |\n|---|---|\n| critic | reviews |\n"
    )
    assert agent_ids(roster) == ["scribe", "researcher", "critic"]
    assert agent_ids(tmp_path / "missing.md") == []


def thoth_cli(tmp_path, config):
    (tmp_path / "thoth.toml").write_text(config)
    env = {"THOTH_HOME": str(tmp_path / "home"), "PATH": str(Path(sys.executable).parent)}
    thoth = str(Path(sys.executable).parent / "thoth")

    def cli(*args, wait=True):
        command = [thoth, "board", *args]
        if not wait:
            return subprocess.Popen(
                command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        return subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)

    return cli


def test_cli_put_get_ls_on_a_persistent_board(tmp_path):
    cli = thoth_cli(tmp_path, '[plugins.blackboard]\nbackend = "memory"\npersist = true\n')
    assert cli("put", "task:3:status", "queued").returncode == 0
    assert cli("put", "task:4:status", "done").returncode == 0  # a second process keeps the first one's value
    assert cli("get", "task:3:status").stdout.strip() == "queued"
    assert cli("ls", "task:").stdout.splitlines() == [
        "task:3:status = queued  (" + cli_user() + ")",
        "task:4:status = done  (" + cli_user() + ")",
    ]
    watched = cli("watch", "task:*", "--timeout", "0.5")
    assert watched.returncode == 2 and 'backend = "sqlite" or "redis"' in watched.stderr


def cli_user():
    import getpass

    return getpass.getuser()


def test_cli_watch_follows_another_process_over_redis(tmp_path, redis_server):
    cli = thoth_cli(tmp_path, f'[plugins.blackboard]\nbackend = "redis"\nurl = "{redis_server.url}"\n')
    watcher = cli("watch", "task:*", "--count", "1", "--timeout", "20", wait=False)
    for _ in range(100):  # publish until the watcher has subscribed and printed one signal
        assert cli("put", "task:5:status", "running").returncode == 0
        try:
            out, _ = watcher.communicate(timeout=0.3)
            break
        except subprocess.TimeoutExpired:
            continue
    assert watcher.returncode == 0
    assert json.loads(out.splitlines()[0])["key"] == "task:5:status"


async def test_boards_are_separate_per_workspace(make_runtime):
    runtime = make_runtime({"blackboard": plugin}, config={"plugins": {"blackboard": {"subscriptions": ["index:*"]}}})
    await runtime.turn("/board put index:status secret-of-team-one", peer="ann", thread="t", workspace="T1")
    other = await runtime.session(peer="bob", thread="t", workspace="T2")
    from thoth_core import Turn

    assembly = await runtime.context(Turn("hi", "bob", "t", "T2"), other)
    assert "secret-of-team-one" not in assembly.system
    assert (await runtime.turn("/board ls", peer="bob", thread="t", workspace="T2")).reply.text == "the board is empty"


def test_subscriptions_must_be_a_list(make_runtime):
    import pytest

    from thoth_core import ConfigError

    with pytest.raises(ConfigError, match="plugins.blackboard.subscriptions: expected a list of key patterns"):
        make_runtime({"blackboard": plugin}, config={"plugins": {"blackboard": {"subscriptions": "index:*"}}})


def test_a_bad_ttl_or_persist_stops_start_up(make_runtime):
    import pytest

    from thoth_core import ConfigError

    with pytest.raises(ConfigError, match=r"plugins.blackboard.ttl: expected a positive integer up to [\d,]+, got -1"):
        make_runtime({"blackboard": plugin}, config={"plugins": {"blackboard": {"ttl": -1}}})
    with pytest.raises(ConfigError, match="plugins.blackboard.persist: expected true or false, got 'no'"):
        make_runtime({"blackboard": plugin}, config={"plugins": {"blackboard": {"persist": "no"}}})


async def test_persistent_boards_of_two_processes_merge_on_close(tmp_path):
    first, second = InProcessBoard(path=tmp_path / "b.json"), InProcessBoard(path=tmp_path / "b.json")
    await first.publish("a", "1")
    await second.publish("b", "2")
    await first.close()
    await second.close()
    again = InProcessBoard(path=tmp_path / "b.json")
    assert [s.key for s in await again.list()] == ["a", "b"]
