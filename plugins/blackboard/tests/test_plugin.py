"""The blackboard plugin in a runtime: context block, /board, roster, persistence, CLI."""

from __future__ import annotations

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
        "# Agents\n\n## scribe — writes summaries\n- **researcher**: finds things\n| id | role |\n|---|---|\n| critic | reviews |\n"
    )
    assert agent_ids(roster) == ["scribe", "researcher", "critic"]
    assert agent_ids(tmp_path / "missing.md") == []


def test_cli_put_get_ls_watch(tmp_path):
    (tmp_path / "thoth.toml").write_text("[plugins.blackboard]\npersist = true\n")
    env = {"THOTH_HOME": str(tmp_path / "home"), "PATH": str(Path(sys.executable).parent)}
    thoth = str(Path(sys.executable).parent / "thoth")

    def cli(*args):
        return subprocess.run(
            [thoth, "board", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
        )

    assert cli("put", "task:3:status", "queued").returncode == 0
    assert cli("get", "task:3:status").stdout.strip() == "queued"
    assert "task:3:status = queued" in cli("ls", "task:").stdout
    watched = cli("watch", "task:*", "--timeout", "0.5")
    assert watched.returncode == 0 and watched.stdout == ""
