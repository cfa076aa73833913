"""Item 5: names, traversal, symlinks, oversize files and malformed frontmatter are rejected, never half-written."""

from __future__ import annotations

import json
import os

import pytest
from thoth_procedural import SkillError, drafts, plugin, validate_skill


def tree(root):
    """Every path under root/.claude and the files' bytes, to prove nothing changed."""
    base = root / ".claude"
    if not base.exists():
        return {}
    return {
        str(p.relative_to(base)): (p.read_bytes() if p.is_file() and not p.is_symlink() else None)
        for p in sorted(base.rglob("*"))
    }


def draft(runtime, name="deploy-check", **kwargs):
    values = {
        "description": "Check a deploy.",
        "body": "Look at the log.",
        "source": {"session_id": "s1"},
        "flags": [],
    } | kwargs
    return drafts.write_draft(runtime, name=name, **values)


BAD_NAMES = [
    "Deploy",
    "-deploy",
    "deploy-",
    "dep--loy",
    "a" * 65,
    "../evil",
    "a/b",
    "..",
    ".",
    "",
    "snake_case",
    "with space",
    "ünï",
    "x\n",
]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_and_traversal_are_rejected_before_anything_is_written(runtime_at, tmp_path, name):
    runtime = runtime_at()
    with pytest.raises(SkillError, match="invalid skill name"):
        draft(runtime, name)
    assert tree(tmp_path) == {} and not (tmp_path / "evil").exists()


@pytest.mark.parametrize("slug", ["../skills/x", "..", "a/../../b"])
async def test_traversal_through_decisions_is_rejected(runtime_at, tmp_path, slug):
    runtime = runtime_at()
    draft(runtime)
    before = tree(tmp_path)
    for decision in ("approve", "reject", "edit"):
        with pytest.raises(Exception, match="no pending item"):  # no draft has such an id: the plugin is never asked
            await runtime.decide(f"skill:{slug}", decision, actor="ann", reason="r", text="t")
        with pytest.raises(Exception, match="invalid skill name"):  # nor would it build a path from it
            plugin.decide(
                item_id=f"skill:{slug}", decision=decision, actor="ann", reason="r", text="t", runtime=runtime
            )
    assert tree(tmp_path) == before


def test_a_name_of_64_characters_is_fine(runtime_at):
    assert draft(runtime_at(), "a" * 64).name == "a" * 64


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"description": "  "}, "needs a description"),
        ({"description": "x" * 1025}, "description has 1025 characters; at most 1024"),
        ({"description": "first --- second"}, "must not contain '---'"),
        ({"body": ""}, "needs a body"),
    ],
)
def test_bad_descriptions_and_bodies_are_rejected_cleanly(runtime_at, tmp_path, kwargs, message):
    with pytest.raises(SkillError, match=message):
        draft(runtime_at(), **kwargs)
    assert [p for p in tree(tmp_path) if not p.endswith("skill-drafts")] == []


def test_an_oversize_file_is_rejected_and_nothing_is_half_written(runtime_at, tmp_path):
    runtime = runtime_at(config={"plugins": {"procedural": {"max_file_kb": 1}}})
    with pytest.raises(SkillError, match=r"SKILL\.md: file is \d+ bytes; the limit is 1024"):
        draft(runtime, body="word " * 400)
    assert [p for p in tree(tmp_path) if not p.endswith("skill-drafts")] == []
    good = draft(runtime)
    (good / "src" / "blob.bin").write_bytes(b"0" * 2048)
    before = tree(tmp_path)
    with pytest.raises(SkillError, match=r"src/blob\.bin: file is 2048 bytes; the limit is 1024"):
        drafts.approve(runtime, "deploy-check", actor="ann")
    assert tree(tmp_path) == before and not (tmp_path / ".claude" / "skills" / "deploy-check").exists()


def test_a_skill_over_the_total_limit_is_rejected(runtime_at):
    runtime = runtime_at(config={"plugins": {"procedural": {"max_file_kb": 8, "max_skill_kb": 8}}})
    folder = draft(runtime)
    for i in range(3):
        (folder / "src" / f"part{i}.txt").write_bytes(b"x" * 3000)
    with pytest.raises(SkillError, match=r"skill is \d+ bytes in all; the limit is 8192"):
        drafts.approve(runtime, "deploy-check", actor="ann")


def test_a_symlink_out_of_the_folder_is_rejected(runtime_at, tmp_path):
    runtime = runtime_at()
    folder = draft(runtime)
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("secret")
    os.symlink(outside, folder / "src" / "secret.txt")
    before = tree(tmp_path)
    with pytest.raises(SkillError, match=r"src/secret\.txt: symlink points outside the skill folder"):
        drafts.approve(runtime, "deploy-check", actor="ann")
    assert tree(tmp_path) == before
    os.unlink(folder / "src" / "secret.txt")
    os.symlink("../../../outside-secret.txt", folder / "src" / "relative.txt")
    with pytest.raises(SkillError, match="symlink points outside"):
        drafts.approve(runtime, "deploy-check", actor="ann")


def test_a_symlink_inside_the_folder_is_kept(runtime_at):
    runtime = runtime_at()
    folder = draft(runtime)
    os.symlink("../SKILL.md", folder / "src" / "instructions.md")
    installed = drafts.approve(runtime, "deploy-check", actor="ann")
    assert (installed / "src" / "instructions.md").is_symlink() and "Look at the log." in (
        installed / "src" / "instructions.md"
    ).read_text()


def test_a_draft_folder_that_is_a_symlink_is_not_a_draft(runtime_at, tmp_path):
    runtime = runtime_at()
    elsewhere = draft(runtime).rename(tmp_path / "elsewhere")
    os.symlink(elsewhere, tmp_path / ".claude" / "skill-drafts" / "deploy-check")
    with pytest.raises(SkillError, match="no pending skill draft 'deploy-check'"):
        drafts.approve(runtime, "deploy-check", actor="ann")


MALFORMED = [
    ("name: deploy-check\ndescription: x\n", "must start with '---'"),
    ("---\nname: deploy-check\ndescription: x\n", "no closing '---'"),
    ("---\nname: deploy-check\ndescription: [unclosed\n---\nbody\n", "malformed frontmatter"),
    ("---\nname: deploy-check\n  description: bad indent\n---\nbody\n", "malformed frontmatter"),
    ("---\n- a list\n- not a mapping\n---\nbody\n", "expected a mapping"),
    ("---\nname: deploy-check\ndescription: x\ntools: Bash\n---\nbody\n", "unknown frontmatter key"),
    ("---\nname: other-name\ndescription: x\n---\nbody\n", "must equal the folder name 'deploy-check'"),
    ("---\nname: deploy-check\n---\nbody\n", "needs a non-empty 'description'"),
    ("---\ndescription: x\n---\nbody\n", "needs a 'name'"),
    ("---\nname: deploy-check\ndescription: x\nmetadata: plain\n---\nbody\n", "metadata must map keys to strings"),
    ("---\nname: deploy-check\ndescription: x\nlicense: GPL-3.0\n---\nbody\n", "license 'Apache-2.0' differs"),
]


@pytest.mark.parametrize(("text", "message"), MALFORMED)
def test_malformed_frontmatter_is_rejected_with_the_file_named(runtime_at, tmp_path, text, message):
    runtime = runtime_at()
    folder = draft(runtime)
    (folder / "SKILL.md").write_text(text)
    before = tree(tmp_path)
    with pytest.raises(SkillError, match=message) as raised:
        drafts.approve(runtime, "deploy-check", actor="ann")
    assert "deploy-check" in str(raised.value) and (
        "SKILL.md" in str(raised.value) or "manifest.json" in str(raised.value)
    )
    assert tree(tmp_path) == before
    [item] = [d for d in drafts.list_drafts(runtime)]
    assert item.error and "invalid" in item.as_item()["flags"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: m.update(name="other"), "name 'other' must equal the skill name"),
        (lambda m: m.pop("version"), "missing key"),
        (lambda m: m.update(tools_allowed="Bash"), "tools_allowed must be a list"),
        (lambda m: m.update(license="MIT"), "license 'MIT' differs from SKILL.md"),
    ],
)
def test_an_inconsistent_manifest_is_rejected(runtime_at, change, message):
    runtime = runtime_at()
    folder = draft(runtime)
    manifest = json.loads((folder / "manifest.json").read_text())
    change(manifest)
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(SkillError, match=message):
        drafts.approve(runtime, "deploy-check", actor="ann")


def test_a_missing_manifest_is_required_for_drafts_only(runtime_at, skill):
    runtime = runtime_at()
    folder = draft(runtime)
    (folder / "manifest.json").unlink()
    with pytest.raises(SkillError, match=r"manifest\.json: missing"):
        drafts.approve(runtime, "deploy-check", actor="ann")
    assert validate_skill(skill("plain-claude-skill", manifest=False)).slug == "plain-claude-skill"
