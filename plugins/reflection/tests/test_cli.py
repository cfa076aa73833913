"""The real `thoth` console script: ask, reflect session, review, nightly, promote, audit."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from thoth_core.testing import run_thoth


def setup_project(tmp_path, thoth_home, good):
    pytest.importorskip("thoth_working", reason="the CLI flow reads the working layer's transcripts")
    (tmp_path / "replay.json").write_text(
        json.dumps([{"purpose": "reflection", "reply": json.dumps(good)}, {"reply": "Use the deploy script."}])
    )
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "replay"\nfounders = ["lead"]\n\n[models.replay]\nfile = "replay.json"\n'
    )
    return {
        "THOTH_CONFIG": str(tmp_path / "thoth.toml"),
        "THOTH_HOME": str(thoth_home),
        "THOTH_LOAD_PLUGINS": "reflection,working",
    }


def thoth(env, *args, ok=True):
    done = run_thoth(*args, env=env)
    if ok:
        assert done.returncode == 0, done.stderr
    return done


def test_reflect_review_nightly_from_the_command_line(tmp_path, thoth_home, good):
    env = setup_project(tmp_path, thoth_home, good)
    assert "Use the deploy script." in thoth(env, "ask", "How do I deploy?", "--peer", "ann").stdout
    [transcript] = list((thoth_home / "working" / "transcripts").glob("*/*.jsonl"))

    result = json.loads(thoth(env, "reflect", "session", transcript.stem).stdout)
    assert result["session_id"] == transcript.stem and result["flags"] == {}
    again = thoth(env, "reflect", "session", transcript.stem, ok=False)
    assert again.returncode == 2 and "already reflected on; pass --again" in again.stderr
    missing = thoth(env, "reflect", "session", "nope", ok=False)
    assert missing.returncode == 2 and "no transcript for session 'nope'" in missing.stderr
    wildcard = thoth(env, "reflect", "session", "*", ok=False)
    assert wildcard.returncode == 2 and "no transcript for session '*'" in wildcard.stderr
    assert "Ann deploys to staging every Friday." in (tmp_path / "persona" / "MEMORY.md").read_text()

    listing = thoth(env, "review", "--actor", "lead").stdout
    [item] = json.loads(thoth(env, "review", "--json", "--actor", "lead").stdout)
    assert item["id"] in listing and "[persona-observation] Lead with the command" in listing
    assert "Nothing is waiting" in thoth(env, "review", "--actor", "mallory").stdout  # nothing about mallory
    assert [i["id"] for i in json.loads(thoth(env, "review", "--json", "--actor", "ann").stdout)] == [item["id"]]
    refused = thoth(env, "review", "approve", item["id"], "--actor", "mallory", ok=False)
    assert refused.returncode == 2 and "mallory may not approve" in refused.stderr
    assert "only founders decide (lead)" in refused.stderr
    assert "approved" in thoth(env, "review", "approve", item["id"], "--actor", "lead").stdout
    assert "Nothing is waiting" in thoth(env, "review", "--actor", "lead").stdout

    later = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    first = json.loads(thoth(env, "reflect", "nightly", "--now", later).stdout)
    assert first["changed"] and first["sessions"] == 1 and first["notes"] == 2
    assert json.loads(thoth(env, "reflect", "nightly", "--now", later).stdout)["changed"] is False
    bad = thoth(env, "reflect", "nightly", "--now", "yesterday", ok=False)
    assert bad.returncode == 2 and "--now: 'yesterday' is not an ISO-8601 time" in bad.stderr
    assert "How do I deploy?" in (tmp_path / "persona" / "MEMORY.md").read_text()

    record = thoth(env, "reflect", "records").stdout.split()[0]
    queued = thoth(
        env, "reflect", "promote", record, "--topic", "deploys", "--text", "Ask which environment first."
    ).stdout
    knowledge_id = queued.split()[1].rstrip(";")
    thoth(env, "review", "edit", knowledge_id, "--text", "Always ask which environment first.", "--actor", "lead")
    thoth(env, "review", "approve", knowledge_id, "--actor", "lead")
    assert "Always ask which environment first." in (tmp_path / "knowledge" / "deploys.md").read_text()

    audit = thoth(env, "reflect", "audit").stdout
    for event in ("run_started", "result", "fanout", "memory_notes_written", "queued", "decision", "nightly"):
        assert event in audit


def test_interactive_review_rejects_with_a_reason(tmp_path, thoth_home, good):
    import subprocess
    import sys
    from pathlib import Path

    env = setup_project(tmp_path, thoth_home, good)
    thoth(env, "ask", "hello", "--peer", "ann")
    [transcript] = list((thoth_home / "working" / "transcripts").glob("*/*.jsonl"))
    thoth(env, "reflect", "session", transcript.stem)
    script = Path(sys.executable).with_name("thoth")
    done = subprocess.run(
        [str(script), "review", "-i", "--actor", "lead"],
        input="r\nnot our style\n",
        capture_output=True,
        text=True,
        env={**__import__("os").environ, **env},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "rejected persona:" in done.stdout
    audit = json.loads(thoth(env, "reflect", "audit", "--json").stdout)
    [decision] = [e for e in audit if e["event"] == "decision"]
    assert decision["actor"] == "lead" and decision["payload"]["reason"] == "not our style"


def test_reflect_without_a_subcommand_shows_its_help(tmp_path, thoth_home):
    shown = run_thoth("reflect", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": "reflection", "THOTH_CONFIG": None})
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Usage: thoth reflect")
    assert all(name in shown.stdout for name in ("session", "nightly", "records", "promote", "audit"))


def test_reflect_idle_ends_and_reflects_what_an_exited_ask_left_once(tmp_path, thoth_home, good):
    import sqlite3

    env = setup_project(tmp_path, thoth_home, good)
    thoth(env, "ask", "How do I deploy?", "--peer", "ann")
    [transcript] = list((thoth_home / "working" / "transcripts").glob("*/*.jsonl"))
    assert json.loads(thoth(env, "reflect", "idle").stdout) == []  # not idle yet: nothing ended
    index = sqlite3.connect(thoth_home / "working" / "sessions.db", isolation_level=None)
    index.execute("UPDATE sessions SET last_active = last_active - 31 * 60")  # 31 minutes ago
    index.close()

    [ended] = json.loads(thoth(env, "reflect", "idle").stdout)
    assert (ended["session_id"], ended["peer"]) == (transcript.stem, "ann")
    runs = [e for e in json.loads(thoth(env, "reflect", "audit", "--json").stdout) if e["event"] == "run_started"]
    assert [e["session_id"] for e in runs] == [transcript.stem]
    assert "Ann deploys to staging every Friday." in (tmp_path / "persona" / "MEMORY.md").read_text()
    last = json.loads(transcript.read_text().splitlines()[-1])
    assert (last["type"], last["reason"]) == ("session_end", "idle")

    assert json.loads(thoth(env, "reflect", "idle").stdout) == []
    thoth(env, "ask", "And on Fridays?", "--peer", "ann")  # the next process's start reaps nothing more
    audit = json.loads(thoth(env, "reflect", "audit", "--json").stdout)
    assert [e["session_id"] for e in audit if e["event"] == "run_started"] == [transcript.stem]


def test_a_short_command_leaves_an_idle_session_for_reflect_idle(tmp_path, thoth_home, good):
    import sqlite3

    env = setup_project(tmp_path, thoth_home, good)
    thoth(env, "ask", "How do I deploy?", "--peer", "ann", "--thread", "one")
    [transcript] = list((thoth_home / "working" / "transcripts").glob("*/*.jsonl"))
    index = sqlite3.connect(thoth_home / "working" / "sessions.db", isolation_level=None)
    index.execute("UPDATE sessions SET last_active = last_active - 31 * 60")
    index.close()

    thoth(
        env, "ask", "Something else", "--peer", "bob", "--thread", "two"
    )  # a short command leaves it: exits stay bounded
    audit = json.loads(thoth(env, "reflect", "audit", "--json").stdout)
    assert [e["session_id"] for e in audit if e["event"] == "run_started"] == []
    assert [s["thread"] for s in json.loads(thoth(env, "reflect", "idle").stdout)] == ["one"]
    audit = json.loads(thoth(env, "reflect", "audit", "--json").stdout)
    assert [e["session_id"] for e in audit if e["event"] == "run_started"] == [transcript.stem]
