"""Agent homes: `thoth init` makes one, commands find it from any folder inside, and say how to make one outside."""

from __future__ import annotations

import json
import subprocess

import pytest

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

PLUGINS = {"THOTH_LOAD_PLUGINS": "working,procedural", "THOTH_HOME": None}


def git(home, *args):
    return subprocess.run(["git", "-C", str(home), *args], capture_output=True, text=True, check=True).stdout


def test_init_makes_a_git_tracked_agent_home_and_completes_it_without_overwriting(tmp_path):
    home = tmp_path / "agent"
    result = run_thoth("init", str(home), cwd=tmp_path, env=PLUGINS)
    assert result.returncode == 0, result.stderr
    assert "wrote thoth.toml" in result.stdout and "wrote persona/SOUL.md" in result.stdout
    assert "wrote .claude/skills/recall-before-answering/SKILL.md" in result.stdout
    assert f"Agent home ready at {home}" in result.stdout
    assert git(home, "log", "--format=%s").splitlines() == ["Create agent home (thoth init)"]
    assert git(home, "status", "--porcelain") == ""
    assert '\nhome = ".thoth"' in (home / "thoth.toml").read_text()

    (home / "persona" / "SOUL.md").write_text("# Soul\n\nMine.\n")
    (home / "persona" / "USER.md").unlink()
    again = run_thoth("init", str(home), cwd=tmp_path, env=PLUGINS)
    assert again.returncode == 0, again.stderr
    assert "wrote persona/USER.md" in again.stdout and "SOUL.md" not in again.stdout
    assert (home / "persona" / "SOUL.md").read_text() == "# Soul\n\nMine.\n"
    assert "already an agent home" in run_thoth("init", cwd=home, env=PLUGINS).stdout


def test_init_refuses_a_repository_with_files_of_its_own_such_as_a_source_checkout(tmp_path):
    checkout = tmp_path / "project"
    checkout.mkdir()
    git(checkout, "init", "-q")
    (checkout / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    git(checkout, "add", "pyproject.toml")
    git(checkout, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x")
    result = run_thoth("init", cwd=checkout, env=PLUGINS)
    assert result.returncode != 0
    assert f"{checkout}: a git repository with files of its own" in result.stderr
    assert not (checkout / "thoth.toml").exists() and not (checkout / "persona").exists()
    assert git(checkout, "log", "--format=%s").splitlines() == ["x"]
    assert run_thoth("init", str(checkout / "agent"), cwd=checkout, env=PLUGINS).returncode == 0


def test_commands_find_the_home_from_a_folder_inside_it_and_keep_data_in_it(tmp_path):
    home = tmp_path / "agent"
    assert run_thoth("init", str(home), cwd=tmp_path, env=PLUGINS).returncode == 0
    inside = home / "knowledge"
    result = run_thoth("context", "hi", "--peer", "ann", "--thread", "t", "--json", cwd=inside, env=PLUGINS)
    assert result.returncode == 0, result.stderr
    blocks = json.loads(result.stdout)["blocks"]
    assert {"persona", "skills", "knowledge"} <= {b["tag"] for b in blocks}
    assert "no agent home" not in result.stderr
    assert (home / ".thoth" / "working").is_dir()  # [thoth] home = ".thoth", relative to thoth.toml
    assert git(home, "status", "--porcelain") == ""  # the data folder is ignored


def test_outside_a_home_commands_say_how_to_make_one_and_write_nothing_where_they_run(tmp_path):
    here = tmp_path / "project"
    here.mkdir()
    env = {**PLUGINS, "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "user")}
    result = run_thoth("context", "hi", "--peer", "ann", cwd=here, env=env)
    assert result.returncode == 0, result.stderr
    assert f"thoth: no agent home here (no thoth.toml in {here} or its parents)" in result.stderr
    assert "`thoth init DIR`" in result.stderr
    assert list(here.iterdir()) == []
    doctor = run_thoth("doctor", cwd=here, env=env)
    assert "ok  config: no thoth.toml, using defaults (no agent home here" in doctor.stdout


def test_trace_plugins_prints_one_line_per_hook_call(tmp_path):
    env = {**PLUGINS, "THOTH_HOME": str(tmp_path / "data"), "THOTH_TRACE_PLUGINS": "1"}
    result = run_thoth("context", "hi", "--peer", "ann", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    traced = [line for line in result.stderr.splitlines() if line.startswith("thoth trace: ")]
    assert any(line.startswith("thoth trace: working.pre_spawn_context ok ") for line in traced), result.stderr
    assert any(line.startswith("thoth trace: procedural.session_start ok ") for line in traced)
    quiet = run_thoth("context", "hi", "--peer", "ann", cwd=tmp_path, env={**env, "THOTH_TRACE_PLUGINS": "0"})
    assert "thoth trace:" not in quiet.stderr


def test_the_plain_chat_reopens_the_peers_last_thread(tmp_path):
    (tmp_path / "thoth.toml").write_text('[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "hi" }]\n')
    env = {**PLUGINS, "THOTH_HOME": str(tmp_path / "data")}
    chat = ("chat", "--frontend", "repl", "--peer", "ann", "--thread", "t1")
    first = run_thoth(*chat, cwd=tmp_path, env=env, input="hello\n")
    assert first.returncode == 0 and "thread t1." in first.stdout, first.stderr
    again = run_thoth("chat", "--frontend", "repl", "--peer", "ann", cwd=tmp_path, env=env)
    assert "peer ann, thread t1." in again.stdout, again.stderr
    other = run_thoth("chat", "--frontend", "repl", "--peer", "bob", cwd=tmp_path, env=env)
    assert "peer bob, thread repl." in other.stdout


def test_a_commit_of_an_unchanged_file_is_no_commit_and_no_error(tmp_path, caplog):
    from thoth_core.git import git_commit, git_init

    (tmp_path / "RULES.md").write_text("- Lead with the command.\n")
    assert git_init(tmp_path, "start", ["RULES.md"])
    (tmp_path / "RULES.md").write_text("- Lead with the command.\n- Ask which environment.\n")
    first = git_commit(tmp_path / "RULES.md", "Approve a rule")
    with caplog.at_level("ERROR", logger="thoth_core.git"):
        again = git_commit(tmp_path / "RULES.md", "Approve a rule")  # an apply done again: nothing changed
    assert first and again is None and not caplog.records
