"""Frontmatter parsed once per text and agent: a later process's session start needs no strictyaml."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from thoth_procedural import frontmatter, plugin
from thoth_procedural.plugin import load_context
from thoth_procedural.validate import SkillError, parse_frontmatter

from thoth_core.testing import run_thoth

SESSION_START = """
import sys
from thoth_core.config import load_config
from thoth_core.runtime import Runtime
from thoth_procedural.plugin import load_context
context = load_context(Runtime(load_config()))
print(len(context.reflexion), "strictyaml" in sys.modules)
"""


@pytest.fixture(autouse=True)
def fresh_memory(monkeypatch):
    """Each test starts as a new process would: nothing parsed, no file read."""
    monkeypatch.setattr(frontmatter, "_parsed", {})
    monkeypatch.setattr(frontmatter, "_loaded", set())
    monkeypatch.setattr(frontmatter, "_changed", False)


def test_a_later_process_of_the_agent_starts_a_session_without_strictyaml(tmp_path, monkeypatch):
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    monkeypatch.delenv("THOTH_HOME")

    def session_start() -> str:
        done = subprocess.run([sys.executable, "-c", SESSION_START], cwd=home, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert session_start() == ["1", "True"]  # the shipped reflexion record and skills are parsed once
    assert session_start() == ["1", "False"]
    remembered = json.loads((home / ".thoth" / "procedural" / "frontmatter.json").read_text())
    assert any("severity:" in text for text in remembered)


def test_an_edited_frontmatter_is_parsed_again_and_a_bad_one_fails_each_time(tmp_path):
    note = tmp_path / "SKILL.md"
    first = parse_frontmatter("---\nname: a\ndescription: old words\n---\nbody", source=note)
    first[0]["description"] = "changed by a caller"
    again = parse_frontmatter("---\nname: a\ndescription: old words\n---\nbody", source=note)
    assert again == ({"name": "a", "description": "old words"}, "body")
    edited, _body = parse_frontmatter("---\nname: a\ndescription: new words\n---\n", source=note)
    assert edited["description"] == "new words"
    for _ in range(2):
        with pytest.raises(SkillError, match=r"SKILL.md: malformed frontmatter: .*disallowed JSONesque"):
            parse_frontmatter("---\nname: [unclosed\n---\n", source=note)


def test_the_file_keeps_the_most_recently_used_texts_and_a_bad_file_is_ignored(runtime_at, tmp_path, monkeypatch):
    runtime = runtime_at()
    folder = runtime.home / "procedural"
    folder.mkdir(parents=True)
    (folder / frontmatter.FILE).write_text("{not json")
    load_context(runtime)  # a corrupt file is no memory: the context loads all the same
    monkeypatch.setattr(frontmatter, "KEPT", 3)
    for n in range(5):
        frontmatter.yaml_data(f"n: {n}\n")
    frontmatter.yaml_data("n: 2\n")  # used again: the most recent
    frontmatter.remember(folder)
    assert list(json.loads((folder / frontmatter.FILE).read_text())) == ["n: 3\n", "n: 4\n", "n: 2\n"]


def test_forget_drops_every_remembered_frontmatter(runtime_at):
    runtime = runtime_at()
    folder = runtime.home / "procedural"
    frontmatter.yaml_data("name: ann-divorce-paperwork\ndescription: Help Ann with her divorce papers\n")
    frontmatter.remember(folder)  # a draft from Ann's session was parsed, then a session started
    assert "Ann" in (folder / frontmatter.FILE).read_text()
    plugin.forget(peer="ann", thread=None, workspace="default", runtime=runtime)
    assert not (folder / frontmatter.FILE).exists() and frontmatter._parsed == {}
