"""The hooks in an agent home made by `thoth init`: context out, each turn recorded once, recall in the next session."""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import resource
import time

import pytest
from click.testing import CliRunner

from thoth_core.cli import cli
from thoth_core.runtime import Runtime

pytestmark = pytest.mark.slow  # spawns thoth processes

for layer in ("thoth_working", "thoth_episodic", "thoth_identity"):  # recall needs the layers installed
    pytest.importorskip(layer)

PEER = "ann"  # as the `agent` fixture configures it


def counts() -> dict[str, int]:
    """Episodes, working-memory turns and identity messages kept for the peer (the layers' own counts)."""

    async def status():
        runtime = Runtime.load()
        try:
            return await runtime.status(peer=PEER)
        finally:
            await runtime.aclose()

    found = {row["plugin"]: row for row in asyncio.run(status())}
    return {
        "episodes": found["episodic"]["episodes"],
        "turns": found["working"]["turns"],
        "messages": found["identity"]["messages"],
    }


def context_of(result) -> str:
    """additionalContext from a hook's stdout (Claude Code's JSON output shape)."""
    output = json.loads(result.stdout)
    assert set(output) == {"hookSpecificOutput"}
    return output["hookSpecificOutput"]["additionalContext"]


def test_a_fact_said_in_one_session_comes_back_in_the_next(agent, hooks, hard_exits):
    start = hooks.run("SessionStart", "s-1", source="startup")
    assert start.exit_code == 0, start.output
    assert json.loads(start.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    stable = context_of(start)
    assert "<persona>" in stable and "<skills>" in stable and "<knowledge>" in stable

    first = hooks.run("UserPromptSubmit", "s-1", prompt="Our staging database listens on port 6543.")
    assert first.exit_code == 0 and "<persona>" not in first.stdout  # stable blocks came at SessionStart

    log = hooks.transcript("s-1")
    log.turn(
        "Our staging database listens on port 6543.",
        "Noted: staging Postgres is on 6543, and deploy.sh still says 5432.",
        tool=("Read", {"file_path": "deploy.sh"}, "psql -p 5432"),
    )
    stop = hooks.run("Stop", "s-1", stop_hook_active=False)
    assert stop.exit_code == 0 and stop.stdout == "", stop.output
    assert counts() == {"episodes": 1, "turns": 1, "messages": 2}

    end = hooks.run("SessionEnd", "s-1", "--wait", reason="prompt_input_exit")
    assert end.exit_code == 0 and end.stdout == "", end.output

    other = hooks.run("UserPromptSubmit", "s-2", prompt="Which port does the staging database use?")
    assert other.exit_code == 0, other.output
    recalled = context_of(other)
    assert "<related-episodes>" in recalled and "6543" in recalled
    assert "<persona>" not in recalled
    assert hard_exits == []  # every hook finished its work within its budget


def test_stop_records_each_turn_once_when_it_fires_twice_or_again_with_more_turns(agent, hooks):
    log = hooks.transcript("s-1")
    log.turn("The release train leaves on Thursdays.", "Got it: releases on Thursdays.")
    assert [hooks.run("Stop", "s-1").exit_code for _ in range(2)] == [0, 0]
    assert hooks.run("Stop", "s-1", stop_hook_active=True).exit_code == 0
    assert counts() == {"episodes": 1, "turns": 1, "messages": 2}

    log.prompt("Who approves a release?")  # Stop fires mid-turn (the reply is not in the file yet)
    assert hooks.run("Stop", "s-1").exit_code == 0
    assert counts()["turns"] == 1
    log.reply("Priya approves releases.")
    assert hooks.run("Stop", "s-1").exit_code == 0
    assert counts() == {"episodes": 2, "turns": 2, "messages": 4}

    log.turn("And hotfixes?", "Any maintainer may ship a hotfix.")  # Stop missed it: SessionEnd records it
    assert hooks.run("SessionEnd", "s-1", "--wait", reason="clear").exit_code == 0
    assert counts() == {"episodes": 3, "turns": 3, "messages": 6}


def test_concurrent_stop_processes_record_a_turn_once(agent, hooks):
    hooks.transcript("s-1").turn("The office wifi is thoth-guest.", "Noted.")
    assert CliRunner().invoke(cli, ["claude-code", "install"]).exit_code == 0
    command = hooks.commands()["Stop"]
    with concurrent.futures.ThreadPoolExecutor(3) as pool:
        done = list(pool.map(lambda _: hooks.shell(command, "Stop", "s-1"), range(3)))
    assert [d.returncode for d in done] == [0, 0, 0], [d.stderr for d in done]
    assert counts() == {"episodes": 1, "turns": 1, "messages": 2}


def children_cpu() -> float:
    """CPU seconds the processes this test waited for have used."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def test_the_installed_commands_work_from_the_project_folder_and_session_end_detaches(agent, hooks, project):
    with (agent / "thoth.toml").open("a", encoding="utf-8") as toml:  # what is given, not how fast: a loaded
        toml.write("budget = 10.0\n")  # machine can spend the default 1.5 s starting Python (the budget tests time it)
    assert CliRunner().invoke(cli, ["claude-code", "install"]).exit_code == 0
    commands = hooks.commands()
    start = hooks.shell(commands["SessionStart"], "SessionStart", "s-1", source="startup")
    assert start.returncode == 0 and "<persona>" in context_of(start), start.stderr
    hooks.transcript("s-1").turn("Invoices go out on the 3rd of each month.", "Understood, the 3rd.")
    assert hooks.shell(commands["Stop"], "Stop", "s-1").returncode == 0
    transcripts = list((agent / ".thoth" / "working" / "transcripts").rglob("*.jsonl"))
    assert len(transcripts) == 1

    started, cpu = time.monotonic(), children_cpu()
    end = hooks.shell(commands["SessionEnd"], "SessionEnd", "s-1", reason="logout")
    assert end.returncode == 0 and end.stdout == ""
    # Claude Code gives SessionEnd hooks about 1.5 s. On a loaded machine starting Python alone can take
    # that long, so there the process's own CPU time shows it left the session's end to a detached worker.
    elapsed, used = time.monotonic() - started, children_cpu() - cpu
    assert elapsed < 1.5 or used < 1.0, (elapsed, used)
    deadline = time.monotonic() + 60
    while '"type": "session_end"' not in transcripts[0].read_text():
        assert time.monotonic() < deadline, (agent / ".thoth" / "claude-code" / "hooks.log").read_text()
        time.sleep(0.1)
    assert '"reason": "claude-code:logout"' in transcripts[0].read_text()

    prompt = hooks.shell(commands["UserPromptSubmit"], "UserPromptSubmit", "s-2", prompt="When do invoices go out?")
    assert prompt.returncode == 0, prompt.stderr
    assert prompt.stdout, (prompt.stderr, (agent / ".thoth" / "claude-code" / "hooks.log").read_text())
    assert "3rd of each month" in context_of(prompt)
    assert sorted(p.name for p in project.iterdir()) == [".claude", "s-1.jsonl"]  # nothing written where hooks run
