"""Issue 36 item 10, what every host must share is shared: three homes with one `[storage] url` (real PostgreSQL).

A session on host A proposes a skill and memory notes; host B lists the draft and the held note (`thoth review`,
`thoth skills list`, as processes) and approves both; host C's memory block (the context the model gets) shows
the notes and its skills index the approved skill, written into C's skills folder. Two hosts approving one draft
at once decide it once; forgetting a peer on one host removes its shared items for all; with PostgreSQL away,
C's turn does not wait for the memory block, it goes without it (counted as missing context).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import thoth_procedural.plugin as procedural
import thoth_reflection.plugin as reflection
import thoth_working.plugin as working
from thoth_procedural import drafts
from thoth_procedural.defaults import copy_defaults
from thoth_procedural.validate import SkillError

from thoth_core import ThothError
from thoth_core.runtime import Runtime
from thoth_core.testing import context_for, make_test_runtime, run_thoth
from thoth_core.testing.postgres import outage

DECIDER = "lead"  # [thoth] owner of every home: decides approvals
PLUGINS = {"working": working, "procedural": procedural, "reflection": reflection}


def reflection_reply(peer: str, skill: str = "deploy-billing") -> dict[str, Any]:
    result = {
        "what_worked": ["Checked the environment first."],
        "what_didnt": [],
        "skill": {"name": skill, "description": "Deploy the billing service.", "body": "1. Build.\n2. Roll out."},
        "memory_notes": [f"{peer} prefers green tea.", "bob runs the billing team."],  # a self-fact; held (general)
        "persona_observations": [],
        "next_check_at": None,
        "user_model_updates": {},
    }
    return {"purpose": "reflection", "reply": json.dumps(result)}


class Hosts:
    """Three agent homes (projects A, B, C, each with its own .thoth) sharing one PostgreSQL database."""

    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url
        self.rules = [reflection_reply("ann"), {"reply": "ok"}]
        self.runtimes: dict[str, Runtime] = {}
        for name in "ABC":
            project = root / name
            project.mkdir()
            copy_defaults(project)  # what `thoth init` writes
            (root / "rules.json").write_text(json.dumps(self.rules))
            (project / "thoth.toml").write_text(
                f'[thoth]\nowner = "{DECIDER}"\nmodel = "replay"\n\n[storage]\nurl = "{url}"\n\n'
                f'[models.replay]\nfile = "{root / "rules.json"}"\n'
            )

    def runtime(self, name: str, *, rules: list[dict[str, Any]] | None = None) -> Runtime:
        project = self.root / name
        config = {"thoth": {"owner": DECIDER}, "storage": {"url": self.url}}
        made = make_test_runtime(project / ".thoth", PLUGINS, config=config, replies=rules or self.rules, root=project)
        self.runtimes[f"{name}{len(self.runtimes)}"] = made
        return made

    def thoth(self, name: str, *args: str) -> Any:
        """`thoth ARGS` run as a process in home `name`."""
        env = {"THOTH_HOME": None, "THOTH_CONFIG": None, "THOTH_LOAD_PLUGINS": "working,procedural,reflection"}
        done = run_thoth(*args, cwd=self.root / name, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    async def close(self) -> None:
        for made in self.runtimes.values():
            await made.aclose()


@pytest.fixture
async def hosts(tmp_path: Path, storage_url: str) -> Any:
    made = Hosts(tmp_path, storage_url)
    yield made
    await made.close()


async def propose(runtime: Runtime, *, peer: str = "ann", thread: str = "t1") -> None:
    """A session of `peer` that ends: reflection proposes a skill and two notes."""
    await runtime.turn("I deployed billing today", peer=peer, thread=thread)
    await runtime.end_session(await runtime.session(peer=peer, thread=thread), "done")
    await runtime.drain()


def memory_of(assembly: Any) -> str:
    return "\n".join(b.text for b in assembly.blocks if b.tag == "memory")


async def test_a_draft_and_notes_proposed_on_a_are_listed_and_approved_on_b_and_shown_on_c(hosts: Hosts) -> None:
    a, b, c = hosts.runtime("A"), hosts.runtime("B"), hosts.runtime("C")
    await propose(a)
    key = drafts.draft_key("deploy-billing", {"workspace": "default", "peer": "ann"})
    assert not (hosts.root / "A" / ".claude" / "skill-drafts").exists()  # not a folder on A only any more

    listed = json.loads(await asyncio.to_thread(hosts.thoth, "B", "skills", "list", "--json", "--actor", DECIDER))
    assert [d["id"] for d in listed["drafts"]] == [f"skill:{key}"]
    review = json.loads(await asyncio.to_thread(hosts.thoth, "B", "review", "--json", "--actor", DECIDER))
    [note] = [i["id"] for i in review if i["id"].startswith("note:")]
    assert {i["id"] for i in review} == {f"skill:{key}", note}

    approved = await b.decide(f"skill:{key}", "approve", actor=DECIDER)
    assert "every host installs it" in approved["message"]
    await b.decide(note, "approve", actor=DECIDER)
    assert await b.approvals(actor=DECIDER) == []

    seen = await context_for(c, "what do I drink?", peer="ann", thread="t9")
    memory = memory_of(seen)
    assert "ann prefers green tea." in memory  # written on A
    assert "bob runs the billing team." in memory  # approved on B
    index = "\n".join(b.text for b in seen.blocks if b.tag == "skills")
    assert "deploy-billing: Deploy the billing service." in index  # approved on B, written into C's folder
    skill = hosts.root / "C" / ".claude" / "skills" / "deploy-billing" / "SKILL.md"
    assert skill.read_text() == (hosts.root / "B" / ".claude" / "skills" / "deploy-billing" / "SKILL.md").read_text()
    assert "green tea" not in memory_of(await context_for(c, "hi", peer="zed", thread="t9"))  # still ann's own
    assert "green tea" not in (hosts.root / "C" / "persona" / "MEMORY.md").read_text()  # C's file: read, not written

    listed_on_c = await asyncio.to_thread(hosts.thoth, "C", "skills", "list", "--actor", DECIDER)
    assert "deploy-billing" in listed_on_c.split("Pending drafts")[0]


async def test_a_note_approved_elsewhere_shows_on_a_live_session_s_next_turn(hosts: Hosts) -> None:
    a, b = hosts.runtime("A"), hosts.runtime("B")
    before = await context_for(b, "hi", peer="ann", thread="live")
    assert "green tea" not in memory_of(before)
    await propose(a)
    after = await context_for(b, "hi", peer="ann", thread="live")  # same session, next turn
    assert "ann prefers green tea." in memory_of(after)


def test_two_hosts_approving_one_draft_at_once_decide_it_once(hosts: Hosts) -> None:
    runtimes = [hosts.runtime(name) for name in "AB"]
    for round_ in range(8):
        slug = f"deploy-round-{round_}"
        source = {"workspace": "default", "peer": "ann", "thread": "t"}
        drafts.write_draft(runtimes[0], name=slug, description="Deploy.", body="Do it.", source=source, flags=[])
        key = drafts.draft_key(slug, source)
        start = threading.Barrier(2)
        outcomes: list[Any] = [None, None]

        def decide(i: int, decision: str) -> None:
            start.wait()
            try:
                if decision == "approve":
                    outcomes[i] = drafts.approve_draft(runtimes[i], key, actor=f"host{i}").message
                else:
                    outcomes[i] = drafts.reject(runtimes[i], key, actor=f"host{i}", reason="no")
            except SkillError as exc:
                outcomes[i] = exc

        decisions = ("approve", "approve") if round_ % 2 == 0 else ("approve", "reject")
        threads = [threading.Thread(target=decide, args=(i, d)) for i, d in enumerate(decisions)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        errors = [o for o in outcomes if isinstance(o, SkillError)]
        assert len(errors) == 1, outcomes  # one decided, the other was told
        winner = outcomes.index(next(o for o in outcomes if not isinstance(o, SkillError)))
        verb = "approved" if decisions[winner] == "approve" else "rejected"
        assert str(errors[0]) == f"skill:{key} was already {verb} by host{winner}"
        entries = [e for e in drafts.read_audit(runtimes[1]) if e.get("key") == key]
        assert [e["action"] for e in entries] == ["draft", decisions[winner]]


async def test_the_runtime_on_the_slower_host_says_who_decided(hosts: Hosts) -> None:
    a, b = hosts.runtime("A"), hosts.runtime("B")
    await propose(a)
    key = drafts.draft_key("deploy-billing", {"workspace": "default", "peer": "ann"})
    await b.approvals(actor=DECIDER)  # B has listed it
    await a.decide(f"skill:{key}", "reject", actor=DECIDER, reason="not now")
    with pytest.raises(ThothError, match=f"no pending item 'skill:{key}'"):
        await b.decide(f"skill:{key}", "approve", actor=DECIDER)


async def test_forgetting_a_peer_on_one_host_removes_its_shared_items_everywhere(hosts: Hosts) -> None:
    a = hosts.runtime("A")
    zed = hosts.runtime("B", rules=[reflection_reply("zed", skill="deploy-billing"), {"reply": "ok"}])
    c = hosts.runtime("C")
    await propose(a, peer="ann")
    await propose(zed, peer="zed")
    before = await c.approvals(actor=DECIDER)
    assert {i["peer"] for i in before} == {"ann", "zed"} and len(before) == 4  # a draft and a held note each

    receipt = await c.forget(peer="ann")
    assert receipt["procedural"]["skill drafts"] == 1 and receipt["reflection"]["memory lines"] == 1
    left = await a.approvals(actor=DECIDER)
    assert {i["peer"] for i in left} == {"zed"} and len(left) == 2  # zed's untouched, seen from A too
    assert "green tea" not in memory_of(await context_for(a, "hi", peer="ann", thread="t8"))
    assert "zed prefers green tea." in memory_of(await context_for(a, "hi", peer="zed", thread="t8"))
    audit = drafts.read_audit(a)
    assert "ann" not in json.dumps(audit) and any(e.get("source", {}).get("peer") == "zed" for e in audit)


async def test_in_an_outage_the_memory_block_is_missing_at_once_and_counted(hosts: Hosts, pg_server: Any) -> None:
    a, c = hosts.runtime("A"), hosts.runtime("C")
    await propose(a)
    assert "green tea" in memory_of(await context_for(c, "hi", peer="ann", thread="t7"))
    with outage(pg_server):
        for _ in range(2):
            started = time.monotonic()
            seen = await context_for(c, "hi", peer="ann", thread="t7")
            took = time.monotonic() - started
            assert took < float(c.config.get("thoth.deadline")) + 1.0, took  # never a pool's wait
            assert memory_of(seen) == ""
            assert {call.plugin: call.status for call in seen.calls}["working"] == "error"  # counted missing


async def test_doctor_warns_of_each_piece_of_state_still_kept_per_host_and_fails_on_none(
    hosts: Hosts, tmp_path: Path
) -> None:
    import thoth_blackboard.plugin as blackboard

    from thoth_core.doctor import diagnose

    plugins = {**PLUGINS, "blackboard": blackboard}
    shared = make_test_runtime(tmp_path / "C" / ".thoth", plugins, config={"storage": {"url": hosts.url}})
    alone = make_test_runtime(tmp_path / "solo" / ".thoth", plugins, root=tmp_path / "solo")
    try:
        lines: list[str] = []
        problems = await diagnose(shared, echo=lines.append)
        warnings = sorted(line.split(";")[0] for line in lines if line.startswith("WARN"))
        board = tmp_path / "C" / ".thoth" / "blackboard" / "board.db"
        assert [w.split(": ")[:2] for w in warnings] == [
            ["WARN blackboard", f"kept on this host only (sqlite, {board}) while [storage] url is shared"],
            ["WARN reflection", "knowledge/"],
            ["WARN reflection", "persona/RULES.md"],
            ["WARN reflection", "reflexion/"],
        ]
        assert problems == sum(line.startswith("BAD") for line in lines)  # a warning is not a problem
        assert "ok  procedural: skill drafts and approved skills are shared" in "\n".join(lines)
        solo: list[str] = []
        await diagnose(alone, echo=solo.append)
        assert not [line for line in solo if line.startswith("WARN")]
    finally:
        await shared.aclose()
        await alone.aclose()


def test_notes_two_hosts_append_at_once_are_all_kept(tmp_path: Path, storage_url: str) -> None:
    from thoth_reflection.memory import MemoryFile

    from thoth_core.config import Config
    from thoth_core.sections import HomeSections

    storage = {"storage": {"url": storage_url}}
    homes = [HomeSections(Config(data=storage, path=tmp_path / h / "thoth.toml")) for h in "AB"]
    files = [MemoryFile(tmp_path / h / "persona" / "MEMORY.md", homes[i]) for i, h in enumerate("AB")]
    start = threading.Barrier(2)

    def append(i: int) -> None:
        start.wait()
        for n in range(10):
            files[i].append_notes([f"host {i} note {n}"], day="2026-12-01", owner=("ann", "default"))

    try:
        threads = [threading.Thread(target=append, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        for memory in files:
            notes = [text for _, text in memory.notes()]
            wanted = [f"host {i} note {n} " for i in (0, 1) for n in range(10)]
            assert len(notes) == 20 and all(any(w in t for t in notes) for w in wanted)
    finally:
        for home in homes:
            home.close()


async def test_a_line_written_on_one_host_is_recalled_on_another_until_forgotten(hosts: Hosts) -> None:
    a, b, c = hosts.runtime("A"), hosts.runtime("B"), hosts.runtime("C")
    await propose(a)  # A's session end writes "ann prefers green tea." into the shared MEMORY.md section

    async def recalled(runtime: Runtime, peer: str) -> list[str]:
        found = await runtime.recall(query="which teas do I like", peer=peer, layer="working")  # no embedder here
        assert not found.failed, found.failed
        return [hit["text"] for hit in found.hits]

    assert "ann prefers green tea." in await recalled(b, "ann")  # "teas": by its stem, on B
    assert "ann prefers green tea." not in await recalled(b, "zed")  # another peer never
    await c.forget(peer="ann")
    assert "ann prefers green tea." not in await recalled(b, "ann")  # forgotten on C: gone on B too


async def test_recall_in_a_database_outage_names_the_layer_at_once_and_answers_again_after(
    hosts: Hosts, pg_server: Any
) -> None:
    a, c = hosts.runtime("A"), hosts.runtime("C")
    await propose(a)
    with outage(pg_server):
        started = time.monotonic()
        found = await c.recall(query="which teas do I like", peer="ann")
        assert time.monotonic() - started < 10.0  # a layer that cannot reach the store fails, it does not hang
        assert "working" in {f["plugin"] for f in found.failed}
    deadline = time.monotonic() + 60
    while True:  # the database is back: the pools reconnect on their own
        found = await c.recall(query="which teas do I like", peer="ann")
        if not found.failed or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert not found.failed and "ann prefers green tea." in [hit["text"] for hit in found.hits]
