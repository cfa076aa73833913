"""`thoth claude-code install/uninstall`: the user's settings and hooks kept, ours once, atomic, reversible."""

from __future__ import annotations

import json

from click.testing import CliRunner

from thoth_core.cli import cli

USERS_SETTINGS = {
    "model": "opus",
    "permissions": {"allow": ["Bash(npm run test:*)"], "deny": ["Read(./.env)"]},
    "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint-bash.sh", "timeout": 5}]}],
        "UserPromptSubmit": [
            {"hooks": [{"type": "command", "command": 'echo "branch: $(git branch --show-current)"'}]}
        ],
    },
}


def thoth(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_install_twice_then_uninstall_keeps_the_users_settings_and_hooks(agent, hooks, project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps(USERS_SETTINGS, indent=4))

    first = thoth("claude-code", "install")
    assert first.exit_code == 0, first.output
    assert f"{settings}: Thoth's Claude Code hooks written:" in first.output
    installed = json.loads(settings.read_text())
    assert installed["model"] == "opus" and installed["permissions"] == USERS_SETTINGS["permissions"]
    assert installed["hooks"]["PreToolUse"] == USERS_SETTINGS["hooks"]["PreToolUse"]
    assert installed["hooks"]["UserPromptSubmit"][0] == USERS_SETTINGS["hooks"]["UserPromptSubmit"][0]
    commands = hooks.commands()
    assert set(commands) == {"SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"}
    for event, command in commands.items():
        assert f"THOTH_CONFIG={agent / 'thoth.toml'} " in command
        assert command.split()[1].startswith("/") and command.endswith(f"claude-code hook {event} || true")
        assert command in first.output
    assert installed["hooks"]["SessionStart"][-1]["matcher"] == "startup|resume|clear|compact"
    assert "matcher" not in installed["hooks"]["Stop"][-1]
    assert all(isinstance(installed["hooks"][e][-1]["hooks"][0]["timeout"], int) for e in commands)

    again = thoth("claude-code", "install")
    assert again.exit_code == 0
    assert json.loads(settings.read_text()) == installed  # replaced, never duplicated
    assert [p.name for p in settings.parent.iterdir()] == ["settings.json"]  # no temporary file left

    removed = thoth("claude-code", "uninstall")
    assert removed.exit_code == 0 and "removed 4 Thoth hook(s)" in removed.output
    assert json.loads(settings.read_text()) == USERS_SETTINGS
    assert "no Thoth hooks; nothing changed" in thoth("claude-code", "uninstall").output


def test_install_in_another_project_or_user_wide(agent, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere"
    assert thoth("claude-code", "install", "--project", str(other)).exit_code == 0
    assert "Stop" in json.loads((other / ".claude" / "settings.json").read_text())["hooks"]

    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert thoth("claude-code", "install", "--user").exit_code == 0
    user_settings = tmp_path / "user" / ".claude" / "settings.json"
    assert set(json.loads(user_settings.read_text())["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "Stop",
        "SessionEnd",
    }
    assert thoth("claude-code", "uninstall", "--user").exit_code == 0
    assert json.loads(user_settings.read_text()) == {}


def test_a_settings_file_that_is_not_json_is_refused_with_one_line_and_left_alone(agent, project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    broken = '{\n  "model": "opus",\n  "hooks": {,}\n}\n'
    settings.write_text(broken)
    for command in ("install", "uninstall"):
        result = CliRunner().invoke(cli, ["claude-code", command])
        assert result.exit_code == 2
        lines = result.output.strip().splitlines()
        assert len(lines) == 1, result.output
        assert lines[0].startswith(f"thoth: error: {settings}:3:") and "not valid JSON" in lines[0]
        assert settings.read_text() == broken


def test_a_hooks_key_of_the_wrong_shape_is_refused(agent, project):
    settings = project / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"hooks": ["oops"]}')
    result = CliRunner().invoke(cli, ["claude-code", "install"])
    assert result.exit_code == 2 and f"{settings}: hooks: expected an object of events" in result.output
    assert settings.read_text() == '{"hooks": ["oops"]}'
