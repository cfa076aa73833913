"""The persona stack: documented order, stable and first in the prompt, missing files fine, unreadable ones named."""

from __future__ import annotations

import logging

import pytest
from thoth_procedural import PERSONA_ORDER, PersonaError, load_persona

from thoth_core.testing import context_for


def write_persona(root, names):
    folder = root / "persona"
    folder.mkdir(exist_ok=True)
    for name in names:
        (folder / name).write_text(f"# {name}\ncontent of {name}\n")
    return folder


def test_documented_order_and_memory_left_to_the_working_layer():
    assert PERSONA_ORDER == ("IDENTITY.md", "SOUL.md", "RULES.md", "AGENTS.md", "USER.md", "TOOLS.md")
    assert "MEMORY.md" not in PERSONA_ORDER


def test_blocks_follow_the_order_whatever_the_files_are_called_on_disk(tmp_path):
    folder = write_persona(tmp_path, reversed(PERSONA_ORDER + ("MEMORY.md", "NOTES.md")))
    blocks = load_persona(folder)
    assert [b.text.splitlines()[0] for b in blocks] == [f"# {name}" for name in PERSONA_ORDER]
    assert all(b.tag == "persona" and b.stable for b in blocks)
    assert [b.priority for b in blocks] == sorted((b.priority for b in blocks), reverse=True)


def test_missing_files_are_fine(tmp_path):
    assert load_persona(tmp_path / "nowhere") == []
    blocks = load_persona(write_persona(tmp_path, ["SOUL.md", "TOOLS.md"]))
    assert [b.text.splitlines()[0] for b in blocks] == ["# SOUL.md", "# TOOLS.md"]


@pytest.mark.parametrize("breakage", ["folder", "bad-utf8"])
def test_an_unreadable_file_is_an_error_naming_it(tmp_path, breakage):
    folder = write_persona(tmp_path, ["IDENTITY.md", "RULES.md"])
    if breakage == "folder":
        (folder / "SOUL.md").mkdir()
    else:
        (folder / "SOUL.md").write_bytes(b"\xff\xfe not utf-8 \xc3\x28")
    with pytest.raises(PersonaError, match=r"persona/SOUL\.md: cannot read persona file"):
        load_persona(folder)
    seen = []
    assert [b.text.splitlines()[0] for b in load_persona(folder, on_error=seen.append)] == [
        "# IDENTITY.md",
        "# RULES.md",
    ]
    assert len(seen) == 1 and "SOUL.md" in str(seen[0])


async def test_persona_is_the_stable_front_of_the_prompt(runtime_at, tmp_path):
    write_persona(tmp_path, PERSONA_ORDER)
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge" / "deploys.md").write_text("We deploy on Thursdays.")
    runtime = runtime_at(replies=[{"reply": "hi"}])
    result = await runtime.turn("hello", peer="ann", thread="t")
    system = runtime.model().requests[-1].system
    persona = [b for b in system if b.tag == "persona"]
    assert system[: len(PERSONA_ORDER)] == persona and all(b.stable and b.layer == "procedural" for b in persona)
    assert [b.text.splitlines()[0] for b in persona] == [f"# {name}" for name in PERSONA_ORDER]
    assert result.assembly.system.startswith("<persona>\n# IDENTITY.md")
    [note] = [b for b in system if b.tag == "knowledge"]
    assert note.stable and "Topic: deploys" in note.text


async def test_persona_is_read_once_per_session_and_errors_are_logged_with_the_file(runtime_at, tmp_path, caplog):
    folder = write_persona(tmp_path, ["IDENTITY.md"])
    runtime = runtime_at()
    first = await context_for(runtime, "hi", peer="ann", thread="t")
    (folder / "IDENTITY.md").write_text("# changed\n")
    (folder / "RULES.md").mkdir()
    again = await context_for(runtime, "hi", peer="ann", thread="t")
    assert [b.text for b in again.blocks if b.tag == "persona"] == [b.text for b in first.blocks if b.tag == "persona"]
    with caplog.at_level(logging.ERROR):
        fresh = await context_for(runtime, "hi", peer="ann", thread="new")
    assert [b.text for b in fresh.blocks if b.tag == "persona"] == ["# changed"]
    assert any("persona/RULES.md: cannot read persona file" in r.getMessage() for r in caplog.records)
