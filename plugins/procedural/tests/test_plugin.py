"""The procedural plugin as a whole: conformance with the shipped defaults, status, settings."""

from __future__ import annotations

import pytest
from thoth_procedural import plugin
from thoth_procedural.defaults import copy_defaults
from thoth_procedural.settings import Settings

from thoth_core import ConfigError
from thoth_core.testing import check_layer_plugin, context_for


@pytest.fixture
def shipped(tmp_path):
    """The test project as `thoth init` makes it: the shipped persona, skills, knowledge and reflexion notes."""
    copy_defaults(tmp_path)
    return tmp_path


def test_init_home_writes_the_defaults_once_and_never_overwrites(tmp_path):
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "SOUL.md").write_text("# Soul\n\nMine.\n")
    written = plugin.init_home(root=tmp_path)
    assert "persona/IDENTITY.md" in written and ".claude/skills/write-thoth-plugin/SKILL.md" in written
    assert "persona/SOUL.md" not in written and (tmp_path / "persona" / "SOUL.md").read_text() == "# Soul\n\nMine.\n"
    assert (tmp_path / ".claude" / "skills" / "recall-before-answering" / "src").is_dir()
    assert plugin.init_home(root=tmp_path) == []


async def test_conformance_with_the_shipped_defaults(runtime_at, shipped):
    await check_layer_plugin(runtime_at(), "procedural")


async def test_the_shipped_stack_fits_the_default_budget_uncut(runtime_at, shipped):
    assembly = await context_for(runtime_at(), "hi", peer="ann", thread="t")
    tags = [b.tag for b in assembly.blocks]
    assert tags[:6] == ["persona"] * 6 and "skills" in tags and "knowledge" in tags
    assert not assembly.cuts
    assert assembly.blocks[0].text.startswith("# Identity") and "You are **Thoth**" in assembly.blocks[0].text


async def test_layer_status_counts(runtime_at, shipped):
    [status] = await (runtime_at()).status(peer="ann")
    assert status == {
        "layer": "procedural",
        "skills": 2,
        "drafts": 0,
        "knowledge": 1,
        "reflexion": 1,
        "plugin": "procedural",
    }


def test_settings_errors_name_the_key(runtime_at):
    with pytest.raises(ConfigError, match=r"plugins\.procedural\.max_file_kb: expected a positive integer"):
        Settings.of(runtime_at(config={"plugins": {"procedural": {"max_file_kb": 0}}}))
    with pytest.raises(ConfigError, match=r"plugins\.procedural\.skills_dir: expected a folder path"):
        Settings.of(runtime_at(config={"plugins": {"procedural": {"skills_dir": 3}}}))


def test_folders_are_configurable(runtime_at, tmp_path):
    settings = Settings.of(
        runtime_at(config={"plugins": {"procedural": {"skills_dir": "skills", "persona_dir": "me"}}})
    )
    assert (settings.skills, settings.persona, settings.drafts) == (
        tmp_path / "skills",
        tmp_path / "me",
        tmp_path / ".claude" / "skill-drafts",
    )


def test_forget_without_drafts_holds_nothing(runtime_at):
    assert plugin.forget(peer="ann", thread=None, workspace="default", runtime=runtime_at()) is None
