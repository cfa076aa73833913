"""Knowledge notes load at start; reflexion records surface only on a turn that hit an error."""

from __future__ import annotations

import logging
import shutil

import pytest
from thoth_procedural import plugin
from thoth_procedural.knowledge import load_reflexion, matching, parse_reflexion

from thoth_core import ModelError, Session, Turn, Usage, hookimpl

RECORD = """---
date: 2026-01-23
agent: Developer
task: Connect to the billing database
severity: high
tags: postgres connection refused
---

## Known Issue
Postgres connection refused on port 5432 during billing sync.

## Root Cause
The database container restarts nightly at 02:00.

## Solution
Retry after the restart window; check `docker ps` for the container.

## Prevention
Schedule billing sync after 02:15.
"""

OTHER = """---
date: 2026-02-01
---

## Known Issue
Slack rate limit hit while posting long replies.

## Solution
Post one message and update it.
"""


class FlakyModel:
    name = "flaky"

    def __init__(self):
        self.calls = []

    async def stream(self, request):
        self.calls.append(request)
        if len(self.calls) == 1:
            raise RuntimeError("psycopg.OperationalError: connection refused (postgres port 5432)")
        yield "Recovered."
        yield Usage()


class FlakyProvider:
    def __init__(self):
        self.model = FlakyModel()

    @hookimpl
    def register_models(self, register):
        register("flaky", lambda runtime, options: self.model)


@pytest.fixture
def records(tmp_path):
    folder = tmp_path / "reflexion"
    folder.mkdir()
    (folder / "2026-01-23-billing-db.md").write_text(RECORD)
    (folder / "2026-02-01-slack-rate.md").write_text(OTHER)
    return folder


def test_records_parse_into_the_four_sections(records):
    record = parse_reflexion(records / "2026-01-23-billing-db.md")
    assert record.meta["task"] == "Connect to the billing database"
    assert set(record.sections) == {"Known Issue", "Root Cause", "Solution", "Prevention"}
    assert record.sections["Solution"].startswith("Retry after the restart window")


def test_matching_picks_the_record_sharing_the_error_words(records):
    loaded = load_reflexion(records)
    assert [r.path.name for r in matching(loaded, "OperationalError: connection refused to postgres")] == [
        "2026-01-23-billing-db.md"
    ]
    assert [r.path.name for r in matching(loaded, "slack said rate limit")] == ["2026-02-01-slack-rate.md"]
    assert matching(loaded, "KeyError: 'user'") == []


def test_malformed_records_are_skipped_with_the_file_named(records, caplog):
    (records / "broken.md").write_text("no frontmatter here\n## Known Issue\nx\n")
    (records / "empty.md").write_text("---\ndate: 2026-01-01\n---\n\n## Solution\nnothing known\n")
    with caplog.at_level(logging.ERROR):
        loaded = load_reflexion(records)
    assert len(loaded) == 2
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert (
        "broken.md: malformed frontmatter" in messages
        and "empty.md: a reflexion record needs a '## Known Issue' section" in messages
    )


async def test_a_record_surfaces_on_the_turn_after_a_model_error(runtime_at, records):
    provider = FlakyProvider()
    runtime = runtime_at({"flaky-provider": provider}, config={"thoth": {"model": "flaky"}})
    first = await runtime.session(peer="ann", thread="t")
    assert not [b for b in first.scratch[plugin.CONTEXT_KEY].blocks if b.tag == "reflexion"]
    with pytest.raises(ModelError):
        await runtime.turn("sync the billing data", peer="ann", thread="t")
    assert "reflexion" not in provider.model.calls[0].system_text  # no error yet on that turn
    retry = await runtime.turn("try the billing sync again", peer="ann", thread="t")
    [block] = [b for b in retry.assembly.blocks if b.tag == "reflexion"]
    assert "connection refused" in block.text and "Retry after the restart window" in block.text
    assert "Schedule billing sync after 02:15." in block.text and "Slack rate limit" not in block.text
    assert not block.stable and block.layer == "procedural"
    calm = await runtime.turn("thanks", peer="ann", thread="t")
    assert not [b for b in calm.assembly.blocks if b.tag == "reflexion"]


async def test_a_turn_carrying_its_own_error_gets_the_record(runtime_at, records):
    runtime = runtime_at()
    session = await runtime.session(peer="ann", thread="t")
    turn = Turn("post the summary", "ann", "t", error="SlackApiError: ratelimited (rate limit)")
    blocks = plugin.pre_spawn_context(turn=turn, session=session)
    [block] = [b for b in blocks if b.tag == "reflexion"]
    assert "Post one message and update it." in block.text and "ratelimited" in block.text
    quiet = plugin.pre_spawn_context(turn=Turn("hello", "ann", "t"), session=session)
    assert not [b for b in quiet if b.tag == "reflexion"]


async def test_an_error_with_no_known_issue_adds_nothing(runtime_at, records):
    runtime = runtime_at()
    session = Session("default", "ann", "t", runtime=runtime)
    session.transcript.append({"type": "error", "turn_id": "x", "at": 0.0, "user": "hi", "error": "KeyError: 'user'"})
    assert not [
        b for b in plugin.pre_spawn_context(turn=Turn("hi", "ann", "t"), session=session) if b.tag == "reflexion"
    ]


def test_the_shipped_reflexion_example_parses_and_matches_an_overload(shipped_home, tmp_path):
    shutil.copytree(shipped_home / "reflexion", tmp_path / "shipped")
    loaded = load_reflexion(tmp_path / "shipped")
    assert loaded and matching(loaded, "anthropic.InternalServerError: 529 overloaded_error")


async def test_the_last_turns_error_is_found_past_rows_that_are_not_turns_and_redacted(runtime_at, records):
    runtime = runtime_at()
    session = Session("default", "ann", "t", runtime=runtime)
    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    error = {
        "type": "error",
        "turn_id": "x",
        "at": 0.0,
        "user": "sync",
        "error": f"connection refused postgres {token}",
    }
    session.transcript += [error, {"type": "session_start", "resumed": True}, {"type": "tool", "name": "t"}]
    [block] = [
        b for b in plugin.pre_spawn_context(turn=Turn("again", "ann", "t"), session=session) if b.tag == "reflexion"
    ]
    assert "Retry after the restart window" in block.text
    assert token not in block.text and "[REDACTED:github-token]" in block.text
    session.transcript.append({"type": "turn", "turn_id": "y", "user": "ok", "assistant": "fine"})
    assert not [
        b for b in plugin.pre_spawn_context(turn=Turn("hi", "ann", "t"), session=session) if b.tag == "reflexion"
    ]
