"""The `thoth` command line: help for every subcommand, and the commands over a test runtime."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from thoth_core import ContextBlock, hookimpl
from thoth_core.budget import block_tokens
from thoth_core.cli import cli
from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

BUILTIN = set(cli.commands)
SUBCOMMANDS = [[name] for name in sorted(BUILTIN) if name != "config"] + [
    ["config"],
    ["config", "get"],
    ["config", "set"],
]


def command_at(path: list[str]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_top_level_help_lists_every_builtin_with_a_summary(tmp_path):
    result = run_thoth("--help", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1].splitlines()
    listed = {line.split()[0]: line.split(maxsplit=1)[1] for line in commands if line.strip()}
    assert set(listed) == BUILTIN
    assert all(summary.strip() for summary in listed.values())


def test_help_still_works_with_a_broken_config(tmp_path):
    (tmp_path / "thoth.toml").write_text("[thoth\n")
    result = run_thoth("--help", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert result.returncode == 0 and "context" in result.stdout


@pytest.mark.parametrize("path", SUBCOMMANDS, ids=[" ".join(p) for p in SUBCOMMANDS])
def test_every_subcommand_documents_itself_and_its_options(path):
    command = command_at(path)
    result = CliRunner().invoke(cli, [*path, "--help"], prog_name="thoth")
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Usage: thoth {' '.join(path)}")
    assert command.help and command.help.splitlines()[0] in result.output
    for param in command.params:
        if isinstance(param, click.Option) and param.name != "help":
            assert param.help, f"thoth {' '.join(path)} {param.opts[0]} has no help"
            assert param.opts[0] in result.output


def test_version(tmp_path):
    result = run_thoth("--version", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.startswith("thoth, version ")


class Greeter:
    LAYER = "identity"

    @hookimpl
    def pre_spawn_context(self, turn):
        return ContextBlock("greeting", f"Greet {turn.peer}.", priority=80)


RAMBLING = ContextBlock("rambling", "word " * 400, priority=10)
RAMBLING_TOKENS = block_tokens(RAMBLING)


class Verbose:
    LAYER = "identity"

    @hookimpl
    def pre_spawn_context(self):
        return RAMBLING


class Holder:
    """Holds per-(peer, thread) items of one kind and forgets them on request."""

    def __init__(self, kind: str, items: dict[tuple[str, str], int]) -> None:
        self.kind, self.items = kind, items

    @hookimpl
    def forget(self, peer, thread, workspace):
        doomed = [key for key in self.items if key[0] == peer and thread in (None, key[1])]
        count = sum(self.items.pop(key) for key in doomed)
        return {self.kind: count} if count else None


def invoke(runtime, *args: str):
    """Run a subcommand in-process against a prepared runtime."""
    return CliRunner().invoke(cli, list(args), obj={"runtime": runtime}, prog_name="thoth")


def test_context_prints_the_prompt_and_reports_cuts(make_runtime):
    runtime = make_runtime(
        {"greeter": Greeter(), "verbose": Verbose()}, config={"budget": {"layers": {"identity": 100}}}
    )
    result = invoke(runtime, "context", "hello", "--peer", "ann")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<greeting>\nGreet ann.\n</greeting>\n\n<rambling>\nword word")
    assert (
        f"-- cut verbose/rambling: {RAMBLING_TOKENS} -> " in result.stderr
        and "(layer budget identity=100)" in result.stderr
    )


def test_context_json_lists_blocks_cuts_and_calls(make_runtime):
    runtime = make_runtime(
        {"greeter": Greeter(), "verbose": Verbose()}, config={"budget": {"layers": {"identity": 100}}}
    )
    out = json.loads(invoke(runtime, "context", "hello", "--peer", "ann", "--json").stdout)
    assert [(b["plugin"], b["layer"], b["tag"]) for b in out["blocks"]] == [
        ("greeter", "identity", "greeting"),
        ("verbose", "identity", "rambling"),
    ]
    assert sum(b["tokens"] for b in out["blocks"]) == out["tokens"] <= 100
    assert [(c["plugin"], c["tag"], c["tokens"], c["reason"]) for c in out["cut"]] == [
        ("verbose", "rambling", RAMBLING_TOKENS, "layer budget identity=100")
    ]
    assert {c["plugin"]: c["status"] for c in out["calls"]} == {"greeter": "ok", "verbose": "ok"}


async def test_runtime_forget_fans_out_and_deletes(make_runtime):
    episodes = Holder("episodes", {("ann", "t1"): 2, ("ann", "t2"): 3, ("bob", "t1"): 4})
    facts = Holder("facts", {("ann", "t1"): 1})
    runtime = make_runtime({"episodic": episodes, "identity": facts})
    assert await runtime.forget(peer="ann", thread="t2") == {"episodic": {"episodes": 3}}
    assert await runtime.forget(peer="ann") == {"episodic": {"episodes": 2}, "identity": {"facts": 1}}
    assert episodes.items == {("bob", "t1"): 4} and facts.items == {}


def test_forget_command_prints_the_combined_receipt(make_runtime):
    runtime = make_runtime(
        {"episodic": Holder("episodes", {("ann", "t1"): 2}), "identity": Holder("facts", {("ann", "t9"): 5})}
    )
    result = invoke(runtime, "forget", "--peer", "ann")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["Forgot peer ann:", "  episodic: 2 episodes", "  identity: 5 facts"]


def test_plugins_lists_the_defaults(tmp_path):
    result = run_thoth("plugins", "--json", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["replay"]["hooks"] == ["register_models"] and rows["replay"]["distribution"] == "thoth-core"
    assert rows["commands"]["enabled"] and "register_commands" in rows["commands"]["hooks"]
    text = run_thoth("plugins", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""}).stdout
    assert any(line.split()[:2] == ["replay", "thoth-core"] and "enabled" in line for line in text.splitlines())


def test_chat_with_an_unknown_frontend_is_a_one_line_error(tmp_path):
    result = run_thoth("chat", "--frontend", "carrier-pigeon", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert result.returncode == 2
    assert (
        result.stderr.strip()
        == "thoth: error: thoth.toml: thoth.frontend: unknown frontend 'carrier-pigeon'; installed: repl"
    )


def test_ask_with_an_empty_message_sends_and_stores_nothing(tmp_path):
    result = run_thoth("ask", " \n", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.strip() == "thoth: error: thoth ask: the message is empty; nothing was sent"
    assert not (tmp_path / ".thoth").exists()


def test_ask_without_a_model_says_how_to_configure_one(tmp_path):
    result = run_thoth("ask", "hello", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert (
        result.returncode == 2
        and "no model is configured" in result.stderr
        and "thoth config set thoth.model" in result.stderr
    )
    memory = run_thoth("ask", "/whoami", "--peer", "ann", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": ""})
    assert memory.returncode == 0 and memory.stdout.startswith("peer ann in workspace default")
