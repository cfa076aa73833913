"""`thoth storage migrate`: an embedded home's memory copied into the shared PostgreSQL, as a user runs it."""

from __future__ import annotations

import json

import psycopg

from thoth_core.testing import run_thoth


def test_an_embedded_home_moves_to_the_shared_store_and_reads_back_from_it(tmp_path, thoth_env, storage_url):
    home = tmp_path / "agent"
    assert run_thoth("init", str(home)).returncode == 0
    (home / "replies.json").write_text(json.dumps([{"reply": "Noted."}]))
    for key, value in (("thoth.model", "replay"), ("models.replay.file", "replies.json")):
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
    embedded = {"THOTH_HOME": str(home / ".thoth"), "THOTH_LOAD_PLUGINS": "working,identity,reflection,procedural"}
    said = run_thoth("ask", "--peer", "ann", "/remember I live in Lyon", cwd=home, env=embedded)
    assert said.returncode == 0, said.stderr
    said = run_thoth("ask", "--peer", "ann", "My violin lesson moved to Thursday.", cwd=home, env=embedded)
    assert said.returncode == 0, said.stderr

    missing = run_thoth("storage", "migrate", cwd=home, env=embedded)
    assert missing.returncode == 2 and "set $THOTH_STORAGE_URL" in missing.stderr
    shared = {**embedded, "THOTH_STORAGE_URL": storage_url}
    moved = run_thoth("storage", "migrate", cwd=home, env=shared)
    assert moved.returncode == 0, moved.stderr
    assert "exporting" in moved.stderr and "importing" in moved.stderr
    assert "identity: 1 peers, 1 facts" in moved.stdout and "working: 1 sessions, 1 transcripts" in moved.stdout
    with psycopg.connect(storage_url) as db:
        assert db.execute("SELECT object FROM thoth_identity.facts").fetchall() == [("Lyon",)]
        entries = [json.loads(row[0]) for row in db.execute("SELECT entry FROM thoth_working.transcript_entries")]
    assert [e["user"] for e in entries if e["type"] == "turn"] == ["My violin lesson moved to Thursday."]

    again = run_thoth("storage", "migrate", cwd=home, env=shared)
    assert again.returncode == 2 and "already holds memory" in again.stderr  # nothing is doubled without --merge
    assert run_thoth("config", "set", "storage.url", '{ "$env" = "THOTH_STORAGE_URL" }', cwd=home).returncode == 0
    (home / ".thoth" / "identity").rename(tmp_path / "old-identity")  # the SQLite copy is not what answers now
    context = run_thoth("context", "--peer", "ann", "--thread", "new", "hello", cwd=home, env=shared)
    assert context.returncode == 0 and "- location: Lyon" in context.stdout, context.stderr
    refused = run_thoth("storage", "migrate", cwd=home, env=shared)
    assert refused.returncode == 2 and "already uses a shared store" in refused.stderr
