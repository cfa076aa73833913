"""Skills: the index is always in context, a skill's SKILL.md only for the turn it is invoked."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from thoth_procedural import SkillError, discover, load_skill, load_skill_tool, run_load_skill, validate_skill

from thoth_core.testing import context_for

BODY = "SECRET-STEPS: first check the deploy log, then roll back."


def blocks(assembly, tag):
    return [b for b in assembly.blocks if b.tag == tag]


async def test_index_lists_every_skill_but_not_its_body(runtime_at, skill):
    skill("rollback-deploy", description="Roll back a bad deploy safely.", body=BODY)
    skill("write-notes", description="Write meeting notes.")
    assembly = await context_for(runtime_at(), "hi", peer="ann", thread="t")
    [index] = blocks(assembly, "skills")
    assert index.stable and index.layer == "procedural"
    assert (
        "- rollback-deploy: Roll back a bad deploy safely." in index.text
        and "- write-notes: Write meeting notes." in index.text
    )
    assert "SECRET-STEPS" not in assembly.system and not blocks(assembly, "skill")


async def test_slash_skill_loads_the_body_for_the_next_turn_only(runtime_at, skill):
    skill("rollback-deploy", description="Roll back a bad deploy safely.", body=BODY)
    runtime = runtime_at(replies=[{"reply": "done"}])
    loaded = await runtime.turn("/skill rollback-deploy", peer="ann", thread="t")
    assert loaded.reply.text == "Skill rollback-deploy loaded for your next message."
    with_skill = await runtime.turn("the deploy broke", peer="ann", thread="t")
    [skill] = blocks(with_skill.assembly, "skill")
    assert BODY in skill.text and "name: rollback-deploy" in skill.text and not skill.stable
    after = await runtime.turn("thanks", peer="ann", thread="t")
    assert not blocks(after.assembly, "skill") and "SECRET-STEPS" not in after.assembly.system


async def test_slash_skill_with_a_message_runs_that_turn_with_the_skill(runtime_at, skill):
    skill("rollback-deploy", body=BODY)
    runtime = runtime_at(replies=[{"match": "broke", "reply": "Rolled back."}])
    result = await runtime.turn("/skill rollback-deploy the deploy broke", peer="ann", thread="t")
    assert result.reply.text == "Rolled back."
    request = runtime.model().requests[-1]
    assert BODY in request.system_text and request.messages[-1].content == "the deploy broke"
    assert not blocks(await context_for(runtime, "next", peer="ann", thread="t"), "skill")


async def test_slash_skill_errors_and_slash_skills_listing(runtime_at, skill):
    skill("rollback-deploy", description="Roll back a bad deploy safely.")
    skill("broken", front="---\nname: other\ndescription: x\n---\n")
    runtime = runtime_at()
    assert "no skill 'nope'" in (await runtime.turn("/skill nope", peer="ann", thread="t")).reply.text
    assert "invalid skill name '../etc'" in (await runtime.turn("/skill ../etc", peer="ann", thread="t")).reply.text
    assert (await runtime.turn("/skill", peer="ann", thread="t")).reply.text.startswith("usage: /skill SLUG")
    listing = (await runtime.turn("/skills", peer="ann", thread="t")).reply.text
    assert "/skill rollback-deploy - Roll back a bad deploy safely." in listing
    assert "invalid:" in listing and "must equal the folder name 'broken'" in listing


def test_invalid_skills_are_left_out_of_the_index(tmp_path, skill):
    skill("good")
    skill("bad", front="---\nname: bad\n---\n")
    (tmp_path / ".claude" / "skills" / ".staging-x").mkdir()
    catalog = discover(tmp_path / ".claude" / "skills")
    assert [s.slug for s in catalog.skills] == ["good"]
    assert len(catalog.errors) == 1 and "SKILL.md: frontmatter needs a non-empty 'description'" in catalog.errors[0]


def test_load_skill_tool_definition_and_result(runtime_at, skill):
    skill("rollback-deploy", body=BODY)
    runtime = runtime_at()
    tool = load_skill_tool(runtime)
    assert tool["name"] == "load_skill" and tool["input_schema"]["properties"]["slug"]["enum"] == ["rollback-deploy"]
    assert BODY in run_load_skill(runtime, {"slug": "rollback-deploy"})
    assert run_load_skill(runtime, {"slug": "../../etc/passwd"}).startswith("error: invalid skill name")


def test_load_skill_rejects_unknown_and_bad_slugs(tmp_path):
    with pytest.raises(SkillError, match="no skill 'ghost'"):
        load_skill(tmp_path, "ghost")
    with pytest.raises(SkillError, match="invalid skill name"):
        load_skill(tmp_path, "a/../b")


@pytest.mark.parametrize("slug", ["write-thoth-plugin", "recall-before-answering"])
def test_shipped_example_skills_are_valid_for_thoth_and_the_reference_validator(slug, shipped_home):
    folder = shipped_home / ".claude" / "skills" / slug
    doc = validate_skill(folder, require_manifest=True)
    assert doc.slug == slug and (folder / "src").is_dir()
    agentskills = str(Path(sys.executable).with_name("agentskills"))
    checked = subprocess.run([agentskills, "validate", str(folder)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_scaffold_script_of_write_thoth_plugin_makes_an_importable_plugin(tmp_path, shipped_home):
    script = shipped_home / ".claude" / "skills" / "write-thoth-plugin" / "src" / "new_plugin.py"
    done = subprocess.run(
        [sys.executable, str(script), "demo-layer", "episodic", "--root", str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "plugins" / "demo-layer"
    assert 'demo-layer = "thoth_demo_layer.plugin"' in (folder / "pyproject.toml").read_text()
    spec = importlib.util.spec_from_file_location("demo_plugin", folder / "thoth_demo_layer" / "plugin.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.LAYER == "episodic" and module.pre_spawn_context(turn=None, session=None) is None
    again = subprocess.run(
        [sys.executable, str(script), "demo-layer", "episodic", "--root", str(tmp_path)], capture_output=True, text=True
    )
    assert again.returncode != 0 and "already exists" in again.stderr


async def test_a_tool_calling_model_loads_a_skill_by_itself(runtime_at, skill, fake_anthropic):
    skill("rollback-deploy", body=BODY)
    fake_anthropic.replies = [
        {"match": "rollback", "tool_use": {"name": "load_skill", "input": {"slug": "rollback-deploy"}}, "once": True},
        "Following the rollback skill.",
    ]
    models = {"anthropic": {"base_url": fake_anthropic.url, "api_key": "test-key"}}
    runtime = runtime_at(config={"thoth": {"model": "anthropic"}, "models": models})
    result = await runtime.turn("How do I rollback the deploy?", peer="ann", thread="t")
    assert result.reply.text.endswith("Following the rollback skill.")
    first, second = fake_anthropic.messages_requests[-2:]
    assert "load_skill" in [t["name"] for t in first.body["tools"]]
    tool_result = second.body["messages"][-1]["content"][0]
    assert tool_result["type"] == "tool_result" and BODY in json.dumps(tool_result)
    [call] = [e for e in result.session.transcript if e["type"] == "tool"]
    assert (call["plugin"], call["name"], call["input"]) == ("procedural", "load_skill", {"slug": "rollback-deploy"})
    await runtime.aclose()
