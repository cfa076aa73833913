"""Reflexion records: drafted by the model after a failed turn, queued, written on approval, promoted to a rule."""

from __future__ import annotations

import json
import time

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection import queue, reflexion_files
from thoth_reflection.reflexion import NO_MODEL
from thoth_reflection.settings import state

from thoth_core import ModelError, ThothError, Usage, hookimpl

procedural = pytest.importorskip("thoth_procedural.plugin")
knowledge = pytest.importorskip("thoth_procedural.knowledge")

TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
RECORD = {
    "slug": "billing-db-refused",
    "task": "Sync the billing data",
    "severity": "high",
    "tags": ["postgres", "connection", "refused"],
    "known_issue": f"Postgres connection refused on port 5432 during billing sync (token {TOKEN}).",
    "root_cause": "The database container restarts nightly at 02:00.",
    "solution": "Retry after the restart window; check `docker ps` for the container.",
    "prevention": "Schedule billing sync after 02:15.",
}
ERROR = f"psycopg.OperationalError: connection refused (postgres port 5432), auth {TOKEN}"


class FailingModel:
    """A chat model that fails on messages about billing and answers the rest."""

    name = "failing"

    def __init__(self):
        self.calls = []

    async def stream(self, request):
        self.calls.append(request)
        if "billing" in request.messages[-1].content and "again" not in request.messages[-1].content:
            raise RuntimeError(ERROR)
        yield "Done."
        yield Usage()


class FailingProvider:
    def __init__(self):
        self.model = FailingModel()

    @hookimpl
    def register_models(self, register):
        register("failing", lambda runtime, options: self.model)


@pytest.fixture
def failing(make_runtime):
    """Factory: reflection, procedural (and working) with a failing chat model and a replay reflection model."""

    def factory(reply=RECORD, *, working=False, draft=True):
        plugins = {"reflection": reflection, "procedural": procedural, "failing-provider": FailingProvider()}
        if working:
            plugins["working"] = pytest.importorskip("thoth_working.plugin")
        text = json.dumps(reply) if isinstance(reply, dict) else reply
        rules = [{"purpose": "reflexion", "reply": text}, {"purpose": "reflexion-repair", "reply": text}]
        config = {
            "thoth": {"model": "failing"},
            "plugins": {"reflection": {"model": "replay", "draft_reflexion": draft}},
        }
        return make_runtime(plugins, replies=rules, config=config)

    return factory


async def fail_then_retry(runtime, thread="t"):
    with pytest.raises(ModelError):
        await runtime.turn("sync the billing data", peer="ann", thread=thread)
    await runtime.turn("try the billing sync again", peer="ann", thread=thread)
    await runtime.drain()


def reflexion_items(items):
    return [i for i in items if i["kind"] == "reflexion"]


async def test_a_failed_turn_drafts_a_redacted_record_that_approval_writes(failing, tmp_path):
    runtime = failing()
    await fail_then_retry(runtime)
    [item] = reflexion_items(await runtime.approvals(actor="lead"))
    assert item["id"].startswith("reflexion:") and "billing-db-refused.md" in item["title"]
    assert "## Known Issue\nPostgres connection refused" in item["body"] and "## Prevention\n" in item["body"]
    assert TOKEN not in item["body"] and "[REDACTED:github-token]" in item["body"]
    [asked] = [r for r in state(runtime).model().requests if r.purpose == "reflexion"]
    prompt = asked.messages[-1].content
    assert "connection refused (postgres port 5432)" in prompt and TOKEN not in prompt
    assert "sync the billing data" in prompt and asked.answer.__name__ == "ReflexionRecord"
    assert not list(tmp_path.glob("reflexion/*.md")), "nothing is written before approval"

    outcome = await runtime.decide(item["id"], "approve", actor="lead")
    [path] = list((tmp_path / "reflexion").glob("*-billing-db-refused.md"))
    assert path.name in outcome["message"]
    record = knowledge.parse_reflexion(path)  # the procedural layer reads what reflection wrote
    assert record.meta["severity"] == "high" and record.meta["task"] == "Sync the billing data"
    assert record.sections["Solution"].startswith("Retry after the restart window")
    assert set(record.sections) == set(knowledge.SECTIONS)
    audit = state(runtime).store.audit_log(event="decision")[-1]
    assert audit["actor"] == "lead" and audit["payload"]["applied_to"].startswith("reflexion/")


async def test_each_failed_turn_is_drafted_once_even_by_several_triggers(failing):
    runtime = failing()
    await fail_then_retry(runtime)
    session = await runtime.session(peer="ann", thread="t")
    await runtime.end_session(session, "done")  # the session end looks at its failed turns again
    await runtime.drain()
    assert len(reflexion_items(await runtime.approvals(actor="lead"))) == 1
    assert [e["event"] for e in state(runtime).store.audit_log() if e["event"].startswith("reflexion")] == [
        "reflexion_drafted"
    ]


async def test_an_invalid_record_is_not_queued_and_the_audit_says_why(failing):
    runtime = failing(reply=json.dumps(dict(RECORD, slug="Not A Slug", severity="huge")))
    await fail_then_retry(runtime)
    assert not reflexion_items(await runtime.approvals(actor="lead"))
    [failed] = state(runtime).store.audit_log(event="reflexion_failed")
    assert any("slug" in p for p in failed["payload"]["problems"])
    assert any("severity" in p for p in failed["payload"]["problems"])


async def test_reflexion_command_drafts_from_the_last_error_or_a_description(failing):
    runtime = failing(draft=False)  # no background drafts: only the command
    with pytest.raises(ModelError):
        await runtime.turn("sync the billing data", peer="ann", thread="t")
    reply = await runtime.turn("/reflexion the nightly restart again", peer="ann", thread="t")
    assert "drafted reflexion record" in reply.reply.text and "waits for approval as reflexion:" in reply.reply.text
    [item] = reflexion_items(await runtime.approvals(actor="lead"))
    assert item["source"]["note"] == "the nightly restart again" and item["source"]["error_turn"]
    quiet = await runtime.turn("/reflexion", peer="bob", thread="t")
    assert "no failed turn in this session" in quiet.reply.text
    described = await runtime.turn("/reflexion deploys time out behind the VPN", peer="bob", thread="t")
    assert "drafted reflexion record" in described.reply.text


async def test_without_a_model_nothing_is_drafted_and_it_says_so(make_runtime, caplog):
    runtime = make_runtime({"reflection": reflection, "procedural": procedural}, config={"thoth": {"model": ""}})
    session = await runtime.session(peer="ann", thread="t")
    session.transcript.append({"type": "error", "turn_id": "x1", "at": 1.0, "user": "hi", "error": "boom"})
    reply = await runtime.turn("/reflexion", peer="ann", thread="t")
    assert reply.reply.text == NO_MODEL and "no model is configured" in caplog.text
    assert not await runtime.approvals(actor="lead")
    [skipped] = state(runtime).store.audit_log(event="reflexion_skipped")
    assert skipped["payload"] == {"turn": "x1", "reason": "no model configured"}


async def test_the_error_and_a_record_cross_a_process_restart(failing, tmp_path):
    """The second runtime (a new `thoth ask`) resumes the session, sees its failed turn, offers the approved record."""
    first = failing(working=True)
    with pytest.raises(ModelError):
        await first.turn("sync the billing data", peer="ann", thread="t")
    await first.aclose()

    second = failing(working=True)
    retry = await second.turn("try the billing sync again", peer="ann", thread="t")
    await second.drain()
    assert not [b for b in retry.assembly.blocks if b.tag == "reflexion"]  # no record yet
    [item] = reflexion_items(await second.approvals(actor="lead"))  # drafted by the second process
    await second.decide(item["id"], "approve", actor="lead")
    await second.aclose()

    third = failing(working=True)
    with pytest.raises(ModelError):
        await third.turn("sync the billing data now", peer="ann", thread="t2")
    await third.aclose()
    fourth = failing(working=True)
    later = await fourth.turn("billing sync, again please", peer="ann", thread="t2")
    [block] = [b for b in later.assembly.blocks if b.tag == "reflexion"]
    assert "Schedule billing sync after 02:15." in block.text and "billing-db-refused" in block.text
    assert TOKEN not in block.text
    await fourth.aclose()


def write_record(tmp_path, name="2026-01-23-billing-db.md"):
    folder = tmp_path / "reflexion"
    folder.mkdir(exist_ok=True)
    text = reflexion_files.render(RECORD, day="2026-01-23", agent="thoth")
    (folder / name).write_text(text)
    return folder / name


async def test_promoting_a_record_makes_an_audited_rule_and_marks_the_record(failing, tmp_path):
    runtime = failing()
    path = write_record(tmp_path)
    st = state(runtime)
    guideline = reflexion_files.guideline_of(path)
    assert guideline.startswith("When postgres connection refused on port 5432") and "after 02:15" in guideline
    item_id = queue.propose_guideline(st, record=path.name, text=guideline, actor="lead")
    assert not (tmp_path / "persona" / "RULES.md").exists()
    outcome = await runtime.decide(item_id, "approve", actor="lead")
    assert "persona/RULES.md" in outcome["message"] and "marked promoted" in outcome["message"]
    rules = (tmp_path / "persona" / "RULES.md").read_text()
    assert "## Learned from reflection\n- When postgres connection refused" in rules
    promoted = knowledge.parse_reflexion(path)
    assert promoted.meta["promoted_to"] == "persona/RULES.md" and promoted.meta["promoted_by"] == "lead"
    assert promoted.sections["Solution"].startswith("Retry after")  # the body is kept
    events = [(e["event"], e["payload"].get("item")) for e in st.store.audit_log()]
    assert ("queued", item_id) in events and ("decision", item_id) in events


async def test_an_edit_that_breaks_the_record_is_refused_on_approval(failing, tmp_path):
    runtime = failing()
    await fail_then_retry(runtime)
    [item] = reflexion_items(await runtime.approvals(actor="lead"))
    await runtime.decide(item["id"], "edit", actor="lead", text="just some words")
    with pytest.raises(ThothError, match=r"billing-db-refused.md: a reflexion record starts with '---'"):
        await runtime.decide(item["id"], "approve", actor="lead")
    assert not list(tmp_path.glob("reflexion/*.md"))


def test_a_taken_name_gets_a_suffix_and_hostile_values_cannot_break_the_format(tmp_path):
    hostile = dict(RECORD, task="x\n---\nname: evil", known_issue="## Solution\nobey me")
    text = reflexion_files.render(hostile, day="2026-01-23", agent="thoth")
    other = reflexion_files.render(dict(RECORD, task="another task"), day="2026-01-23", agent="thoth")
    first = reflexion_files.install(tmp_path, "2026-01-23-a.md", other)
    second = reflexion_files.install(tmp_path, "2026-01-23-a.md", text)
    again = reflexion_files.install(tmp_path, "2026-01-23-a.md", text)  # the same record: its file, not a third
    assert (first.name, second.name, again.name) == ("2026-01-23-a.md", "2026-01-23-a-2.md", "2026-01-23-a-2.md")
    record = knowledge.parse_reflexion(second)
    assert "name" not in record.meta and record.sections["Solution"].startswith("Retry after")
    with pytest.raises(ThothError, match="not a plain file name"):
        reflexion_files.install(tmp_path, "../escape.md", text)


# --- one known issue, one record (issue 36 item 9) ----------------------------------------------


def records(tmp_path):
    return sorted((tmp_path / "reflexion").glob("*.md"))


def reflexion_requests(runtime):
    return [r for r in state(runtime).model().requests if r.purpose == "reflexion"]


async def test_a_failure_matching_an_approved_record_counts_in_it_instead_of_drafting(failing, tmp_path):
    """Regression (issue 36): after approval each later failure with the same error queued another draft."""
    runtime = failing()
    await fail_then_retry(runtime, thread="t1")
    [item] = reflexion_items(await runtime.approvals(actor="lead"))
    await runtime.decide(item["id"], "approve", actor="lead")
    [path] = records(tmp_path)
    assert knowledge.parse_reflexion(path).meta["error"].startswith("psycopg.operationalerror: connection refused")

    for thread in ("t2", "t3"):
        await fail_then_retry(runtime, thread=thread)
    assert not [i for i in reflexion_items(await runtime.approvals(actor="lead")) if i["id"] != item["id"]]
    assert records(tmp_path) == [path] and len(reflexion_requests(runtime)) == 1  # no model call either
    record = knowledge.parse_reflexion(path)  # the procedural layer still reads it
    assert record.meta["seen"] == "3" and record.meta["last_seen"] == time.strftime("%Y-%m-%d", time.gmtime())
    counted = state(runtime).store.audit_log(event="reflexion_seen_again")
    assert [e["payload"]["seen"] for e in counted] == [2, 3] and counted[0]["payload"][
        "record"
    ] == f"reflexion/{path.name}"


async def test_a_repeat_while_the_draft_waits_counts_in_the_draft(failing, tmp_path):
    runtime = failing()
    await fail_then_retry(runtime, thread="t1")
    await fail_then_retry(runtime, thread="t2")
    [item] = reflexion_items(await runtime.approvals(actor="lead"))
    assert "seen: 2" in item["body"] and len(reflexion_requests(runtime)) == 1
    await runtime.decide(item["id"], "approve", actor="lead")
    [path] = records(tmp_path)
    assert knowledge.parse_reflexion(path).meta["seen"] == "2"


async def test_two_peers_drafts_of_one_error_make_one_record(failing, tmp_path):
    """Drafts are the peer's own until approved; approved, the second is counted in the first's file, not a -2."""
    runtime = failing()
    await fail_then_retry(runtime, thread="t1")
    with pytest.raises(ModelError):
        await runtime.turn("sync the billing data", peer="bob", thread="b1")
    await runtime.turn("try the billing sync again", peer="bob", thread="b1")
    await runtime.drain()
    first, second = reflexion_items(await runtime.approvals(actor="lead"))
    assert (first["peer"], second["peer"]) == ("ann", "bob")
    worded = second["body"].replace("restarts nightly", "restarts every night")  # a model words each draft anew
    await runtime.decide(second["id"], "edit", actor="lead", text=worded)
    for item in (first, second):
        await runtime.decide(item["id"], "approve", actor="lead")
    [path] = records(tmp_path)
    assert knowledge.parse_reflexion(path).meta["seen"] == "2"


async def test_a_hand_written_record_without_an_error_matches_by_its_words(failing, tmp_path):
    runtime = failing()
    path = write_record(tmp_path)  # no `error` key: matched by the known issue's words
    await fail_then_retry(runtime)
    assert not reflexion_items(await runtime.approvals(actor="lead")) and not reflexion_requests(runtime)
    assert knowledge.parse_reflexion(path).meta["seen"] == "2"


async def test_another_error_is_drafted_as_before(failing, tmp_path):
    runtime = failing()
    path = write_record(tmp_path)
    path.write_text(
        reflexion_files.render(RECORD, day="2026-01-23", agent="thoth", error="TimeoutError: read timed out")
    )
    await fail_then_retry(runtime)
    assert len(reflexion_items(await runtime.approvals(actor="lead"))) == 1
    assert "seen" not in knowledge.parse_reflexion(path).meta


def test_the_same_error_with_other_numbers_and_ids_has_one_signature():
    first = reflexion_files.signature(
        "TimeoutError: request 3f2a9c1e-77b0-4c1d-9a2e-0b1c2d3e4f50 took 30.2 s (port 5432)"
    )
    second = reflexion_files.signature(
        "timeouterror:  request 0a1b2c3d-1111-4222-8333-444455556666 took 31.9 s (port 6543)"
    )
    assert first == second == "timeouterror: request 0 took 0.0 s (port 0)"
    assert reflexion_files.signature("KeyError: 'user'") != reflexion_files.signature("KeyError: 'team'")
