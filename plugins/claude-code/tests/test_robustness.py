"""A hook never blocks or stalls Claude Code: bad input is one stderr line and exit 0, slow plugins miss the budget."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from thoth_core.cli import cli
from thoth_core.testing import run_thoth


def install():
    assert CliRunner().invoke(cli, ["claude-code", "install"]).exit_code == 0


@pytest.mark.parametrize(
    ("stdin", "message"),
    [
        ("this is not json", "stdin: not valid JSON (Expecting value at line 1 column 1)"),
        ('["a", "list"]', "stdin: expected a JSON object, got list"),
        (
            '{"hook_event_name": "UserPromptSubmit", "prompt": "hi"}',
            "stdin: session_id: expected Claude Code's session id",
        ),
        ('{"session_id": "s", "prompt": 42}', "stdin: prompt: expected a string, got 42"),
    ],
)
def test_bad_stdin_is_one_stderr_line_and_exit_0(agent, hooks, stdin, message):
    result = hooks.run("UserPromptSubmit", "s-1", stdin=stdin)
    assert result.exit_code == 0
    assert result.stdout == ""
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith(f"thoth claude-code hook UserPromptSubmit: {message}")


def test_bad_stdin_through_the_installed_command_and_an_unknown_event(agent, hooks):
    install()
    command = hooks.commands()["Stop"]
    result = hooks.shell(command, "Stop", "s-1", stdin="{truncated")
    assert result.returncode == 0 and result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "thoth claude-code hook Stop: stdin: not valid JSON (Expecting property name enclosed in double quotes "
        "at line 1 column 2)"
    ]
    unknown = hooks.run("PreToolUse", "s-1")
    assert unknown.exit_code == 0 and unknown.stdout == ""
    assert (
        "unknown event 'PreToolUse'; Thoth handles SessionStart, UserPromptSubmit, Stop, SessionEnd" in unknown.stderr
    )


def test_a_missing_transcript_records_nothing_and_a_bad_setting_is_one_line(agent, hooks):
    assert hooks.run("Stop", "s-1").exit_code == 0  # no transcript written yet
    with (agent / "thoth.toml").open("a") as toml:
        toml.write("budjet = 3\n")
    # the core refuses the key (exit 2; `|| true` in the hook)
    result = hooks.run("UserPromptSubmit", "s-1", prompt="hi")
    assert result.exit_code == 2 and result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith(f"thoth: error: {agent / 'thoth.toml'}:") and "\n" not in line
    assert "plugins.claude-code.budjet: unknown key in [plugins.claude-code]; did you mean 'budget'?" in line
    (agent / "thoth.toml").write_text((agent / "thoth.toml").read_text().replace("budjet = 3", "budget = nan"))
    result = hooks.run("UserPromptSubmit", "s-1", prompt="hi")  # a bad value: the hook's own one line, exit 0
    assert result.exit_code == 0 and result.stdout == ""
    line = result.stderr.strip()
    assert line.startswith(f"thoth claude-code hook UserPromptSubmit: {agent / 'thoth.toml'}:")
    assert line.endswith("plugins.claude-code.budget: expected a positive number up to 600, got nan")


def test_a_broken_thoth_toml_never_blocks_claude_code(agent, hooks):
    install()
    (agent / "thoth.toml").write_text("[thoth\nmodel = \n")
    result = hooks.shell(hooks.commands()["UserPromptSubmit"], "UserPromptSubmit", "s-1", prompt="hi")
    assert result.returncode == 0 and result.stdout == ""  # the core says exit 2; `|| true` keeps it from blocking
    assert f"{agent / 'thoth.toml'}:1: invalid TOML" in result.stderr


def test_the_config_shows_the_plugins_defaults(agent):
    result = run_thoth("config", "get", "plugins.claude-code.budget", env={"THOTH_CONFIG": str(agent / "thoth.toml")})
    assert result.returncode == 0 and result.stdout.strip() == "1.5", result.stderr
    assert run_thoth("config", "get", "plugins.claude-code.peer").stdout.strip() == "ann"


def test_a_slow_plugin_is_skipped_and_what_is_ready_is_given_in_process(agent, hooks, slow_plugins):
    with (agent / "thoth.toml").open("a") as toml:
        toml.write("budget = 4.0\n")  # room for a loaded machine to load the plugins; far below the slow one's 60 s
    result = hooks.run("UserPromptSubmit", "s-1", prompt="hello")
    assert result.exit_code == 0, result.output
    context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "quick plugin was here" in context and "too late" not in context  # given at the budget, not after 60 s


@pytest.mark.parametrize("blocking_async", [False, True])
def test_the_prompt_hook_process_keeps_its_budget_with_a_slow_plugin(agent, hooks, slow_plugins, blocking_async):
    install()
    command = hooks.commands()["UserPromptSubmit"]
    with (agent / "thoth.toml").open("a") as toml:
        # counted from the process's start: Python and the plugins take ~0.4 s of it, seconds on a loaded machine
        toml.write("budget = 8.0\n")
    fast = hooks.shell(
        command, "UserPromptSubmit", "s-0", prompt="hello", env={"THOTH_LOAD_PLUGINS": "working,quick,claude-code"}
    )
    assert "quick plugin was here" in fast.stdout, fast.stderr
    env = {"CC_SLOW_ASYNC": "1" if blocking_async else None}
    result = hooks.shell(command, "UserPromptSubmit", "s-1", prompt="hello", env=env, timeout=30)
    assert result.returncode == 0, result.stderr  # it left at its budget: the plugin sleeps 60 s
    if blocking_async:  # the plugin holds the event loop: nothing is ready, the process leaves at the budget
        assert result.stdout == ""
        assert "UserPromptSubmit context not ready within its budget" in result.stderr
    else:
        context = json.loads(result.stdout)["hookSpecificOutput"]["additionalContext"]
        assert "quick plugin was here" in context and "too late" not in context
