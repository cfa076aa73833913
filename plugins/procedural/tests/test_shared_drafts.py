"""Skill drafts with a shared store (`[storage] url`, real PostgreSQL): one set of drafts for every host, decided
once, approved skills written into each host's skills folder, the shared table of approvals cases, and what
`thoth doctor` says is still kept per host."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from thoth_procedural import drafts, plugin
from thoth_procedural.settings import Settings
from thoth_procedural.shared import shared_drafts

from thoth_core import ThothError
from thoth_core.approvals import ApprovalRefused
from thoth_core.doctor import diagnose
from thoth_core.runtime import Runtime
from thoth_core.testing import context_for, make_test_runtime
from thoth_core.testing.approvals import CASES, OWNER, PERSON, STRANGER, WORKSPACE, AdminPlugin, Case, thoth_table
from thoth_core.testing.postgres import fresh_database

SKILL_FILES = ["SKILL.md", "manifest.json", "src/.gitkeep"]


@pytest.fixture
async def hosts(tmp_path: Path) -> Any:
    """Factory: a runtime of one host, its project `tmp_path/<name>` and data `tmp_path/<name>/.thoth` its own."""
    made: list[Runtime] = []

    def make(name: str, config: dict[str, Any], plugins: dict[str, Any] | None = None) -> Runtime:
        root = tmp_path / name
        plugins = {"procedural": plugin, **(plugins or {})}
        runtime = make_test_runtime(root / ".thoth", plugins, config=config, root=root)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.aclose()


@pytest.fixture
def host(hosts: Any, storage_url: str) -> Any:
    """Factory: a host of a home sharing `storage_url`, `ann` its owner."""
    return lambda name: hosts(name, {"thoth": {"owner": "ann"}, "storage": {"url": storage_url}})


def drafted(runtime: Any, peer: str | None, *, name: str = "deploy-billing", body: str = "Steps.") -> str:
    source = {"workspace": WORKSPACE, "peer": peer, "thread": "t", "session_id": f"s-{peer}"} if peer else None
    drafts.write_draft(runtime, name=name, description="Deploy billing.", body=body, source=source, flags=["x"])
    return drafts.draft_key(name, source)


async def test_a_draft_written_on_one_host_is_listed_shown_edited_and_approved_on_another(host: Any, tmp_path: Path):
    a, b = host("a"), host("b")
    key = drafted(a, "bob")
    assert not (tmp_path / "a" / ".claude" / "skill-drafts").exists()
    [item] = await b.approvals(actor="ann")
    assert (item["id"], item["peer"], item["flags"]) == (f"skill:{key}", "bob", ["x"])
    assert "thoth_procedural" in item["path"] and "Steps." in item["body"]
    assert drafts.resolve_key(b, "deploy-billing") == key

    await b.decide(f"skill:{key}", "edit", actor="ann", text="Better steps.")
    assert "Better steps." in drafts.find_draft(a, key).text
    done = await a.decide(f"skill:{key}", "approve", actor="ann")
    installed = tmp_path / "a" / ".claude" / "skills" / "deploy-billing"
    assert done["path"] == str(installed) and "Better steps." in (installed / "SKILL.md").read_text()
    assert await b.approvals(actor="ann") == []
    assert [e["action"] for e in drafts.read_audit(b)] == ["draft", "edit", "approve"]

    context = await context_for(b, "hi", peer="ann", thread="t")  # b's next session writes the skill there
    assert "deploy-billing: Deploy billing." in context.system
    copy = tmp_path / "b" / ".claude" / "skills" / "deploy-billing"
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == SKILL_FILES
    assert (copy / "SKILL.md").read_text() == (installed / "SKILL.md").read_text()


async def test_a_rejected_draft_is_gone_for_every_host_and_a_second_decision_says_who_decided(host: Any):
    a, b = host("a"), host("b")
    key = drafted(a, "bob")
    assert str(drafts.reject(b, key, actor="ann", reason="not now")).endswith("table rejected")
    assert drafts.list_drafts(a) == []
    with pytest.raises(ThothError, match=re.escape(f"skill:{key} was already rejected by ann")):
        drafts.approve_draft(a, key, actor="lead")
    with pytest.raises(ThothError, match=re.escape(f"skill:{key} was already rejected by ann")):
        drafts.edit(a, key, actor="lead", text="x")


async def test_an_approved_skill_updates_copies_written_from_the_store_and_leaves_a_person_s_own(
    host: Any, tmp_path: Path
):
    a, b = host("a"), host("b")
    drafts.approve(a, drafted(a, "bob", body="First."), actor="ann")
    await context_for(b, "hi", peer="ann", thread="t1")
    copy = tmp_path / "b" / ".claude" / "skills" / "deploy-billing" / "SKILL.md"
    assert "First." in copy.read_text()
    drafts.approve(a, drafted(a, "bob", body="Second."), actor="ann")
    await context_for(b, "hi", peer="ann", thread="t2")
    assert "Second." in copy.read_text()  # b's copy was the store's: replaced by the newer approval

    copy.write_text(copy.read_text() + "\nMy own line.\n")  # a person edits b's copy
    drafts.approve(a, drafted(a, "bob", body="Third."), actor="ann")
    await context_for(b, "hi", peer="ann", thread="t3")
    assert "My own line." in copy.read_text() and "Third." not in copy.read_text()
    lines: list[str] = []
    await diagnose(b, echo=lines.append)
    [warning] = [line for line in lines if "deploy-billing" in line]
    assert warning.startswith("WARN ") and "differs from the skill approved in the shared store" in warning


async def test_drafts_a_host_kept_before_the_store_was_shared_are_taken_into_it(
    hosts: Any, host: Any, tmp_path: Path
):
    root = tmp_path / "a"
    alone = hosts("a", {"thoth": {"owner": "ann"}})
    key = drafted(alone, "bob")
    assert (root / ".claude" / "skill-drafts" / key / "draft.json").is_file()
    a, b = host("a"), host("b")
    [item] = await a.approvals(actor="ann")  # taken into the store on first use
    assert item["id"] == f"skill:{key}" and item["source"]["peer"] == "bob"
    assert not (root / ".claude" / "skill-drafts" / key).exists()
    assert [i["id"] for i in await b.approvals(actor="ann")] == [f"skill:{key}"]


async def test_doctor_names_what_is_still_kept_per_host(host: Any) -> None:
    lines: list[str] = []
    await diagnose(host("a"), echo=lines.append)
    assert "ok  procedural: skill drafts and approved skills are shared (PostgreSQL schema thoth_procedural," in (
        "\n".join(lines)
    )
    assert not [line for line in lines if line.startswith("WARN procedural")]


def test_without_a_shared_store_nothing_is_opened(make_runtime: Any, tmp_path: Path) -> None:
    runtime = make_runtime({"procedural": plugin}, root=tmp_path, config={"thoth": {"owner": "ann"}})
    drafted(runtime, "bob")
    assert shared_drafts(runtime) is None and Settings.of(runtime).drafts.is_dir()


# --- the shared table of approvals cases, on drafts in the shared store -----------------------------------------


@pytest.fixture(scope="module")
def table_url(pg_server: Any) -> str:
    """One database for the whole table: each case drafts skills of its own name."""
    return fresh_database(pg_server)


@pytest.mark.parametrize(("n", "case"), list(enumerate(CASES)), ids=[c.id for c in CASES])
async def test_the_approvals_table_on_shared_drafts(hosts: Any, table_url: str, n: int, case: Case) -> None:
    config = {"thoth": thoth_table(case), "storage": {"url": table_url}}
    proposer, decider = hosts("a", config), hosts("b", config, {"admins": AdminPlugin()})
    people = (OWNER, PERSON, STRANGER, None)
    keys = {about: drafted(proposer, about, name=f"case{n}-{about or 'nobody'}") for about in people}
    target = f"skill:{keys[case.about]}"
    if case.action == "list":
        shown = {i["id"] for i in await decider.approvals(actor=case.actor, workspace=WORKSPACE)}
        assert (target in shown) == case.allowed
        return
    text = "new words" if case.action == "edit" else None
    if case.allowed:
        await decider.decide(target, case.action, actor=case.actor, text=text)
        still = drafts.find_draft(proposer, keys[case.about])
        assert (still is not None) == (case.action == "edit")
        assert still is None or "new words" in still.text
    else:
        with pytest.raises(ApprovalRefused, match=re.escape(case.refusal)):
            await decider.decide(target, case.action, actor=case.actor, text=text)
        assert "Steps." in drafts.find_draft(proposer, keys[case.about]).text  # untouched


def test_the_drafts_table_holds_only_a_draft_s_files_and_meta(host: Any) -> None:
    a = host("a")
    key = drafted(a, "bob")
    store = shared_drafts(a)
    files, meta = store.get(key)
    assert sorted(files) == SKILL_FILES and meta["source"]["peer"] == "bob" and meta["flags"] == ["x"]
    assert json.loads(files["manifest.json"])["name"] == "deploy-billing"
