from __future__ import annotations

import json
from pathlib import Path

import pytest
from thoth_procedural import plugin
from thoth_procedural.defaults import copy_defaults


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""


@pytest.fixture
def runtime_at(make_runtime, tmp_path):
    """A runtime with the procedural plugin whose project root is tmp_path, and `ann` the home's owner (who decides
    approvals unless the test sets founders)."""

    def make(plugins=None, **kwargs):
        config = kwargs.pop("config", None) or {}
        config = {**config, "thoth": {"owner": "ann", **config.get("thoth", {})}}
        return make_runtime({"procedural": plugin, **(plugins or {})}, root=tmp_path, config=config, **kwargs)

    return make


@pytest.fixture
def shipped_home(tmp_path_factory) -> Path:
    """A folder holding what `thoth init` writes from this plugin's package data: persona, skills, notes."""
    home = tmp_path_factory.mktemp("shipped")
    assert copy_defaults(home)
    return home


@pytest.fixture
def skill(tmp_path):
    """Factory: an installed skill folder under tmp_path/.claude/skills."""
    return lambda slug, **kwargs: write_skill(tmp_path, slug, **kwargs)


def write_skill(
    root: Path,
    slug: str,
    *,
    description: str = "Does a thing.",
    body: str = "Step one.",
    manifest: bool = True,
    front: str | None = None,
) -> Path:
    """An installed skill folder under root/.claude/skills."""
    folder = root / ".claude" / "skills" / slug
    (folder / "src").mkdir(parents=True)
    text = front if front is not None else f"---\nname: {slug}\ndescription: {description}\n---\n"
    (folder / "SKILL.md").write_text(f"{text}\n{body}\n")
    if manifest:
        (folder / "manifest.json").write_text(
            json.dumps({"name": slug, "version": "1.0.0", "author": "me", "license": "MIT", "tools_allowed": []})
        )
    return folder
