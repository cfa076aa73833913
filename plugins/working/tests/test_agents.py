"""Working sessions belong to one agent (`[thoth] agent`); index files from before agents migrate."""

from __future__ import annotations

import json
import sqlite3
import time

from thoth_working import plugin as working
from thoth_working import read_transcript
from thoth_working.store import MIGRATIONS, transcript_path

BEFORE_AGENTS = """
CREATE TABLE sessions (
    session_id TEXT PRIMARY KEY, workspace TEXT NOT NULL, peer TEXT NOT NULL, thread TEXT NOT NULL,
    started_at REAL NOT NULL, last_active REAL NOT NULL, turns INTEGER NOT NULL DEFAULT 0, closed TEXT
);
CREATE INDEX sessions_by_key ON sessions (workspace, peer, thread, last_active);
"""


def old_index(home, now):
    """A sessions.db as releases before agents left it: one open session of ann in thread t."""
    (home / "working").mkdir(parents=True)
    with sqlite3.connect(home / "working" / "sessions.db") as db:
        db.executescript(BEFORE_AGENTS)
        db.execute("INSERT INTO sessions VALUES ('s_old', 'default', 'ann', 't', ?, ?, 1, NULL)", (now, now))
    path = transcript_path(home / "working", "s_old", now)
    path.parent.mkdir(parents=True)
    turn = {
        "type": "turn",
        "at": now,
        "session_id": "s_old",
        "turn_id": "x",
        "user": "I sold the piano",
        "assistant": "ok",
    }
    path.write_text(json.dumps(turn) + "\n", encoding="utf-8")


async def test_an_index_from_before_agents_is_the_default_agents(make_runtime, thoth_home):
    old_index(thoth_home, time.time())
    other = make_runtime({"working": working}, config={"thoth": {"agent": "scout"}})
    assert (await other.session(peer="ann", thread="t")).history == []  # another agent does not resume it
    assert await other.last_thread(peer="ann") is None
    default = make_runtime({"working": working})
    resumed = await default.session(peer="ann", thread="t")
    assert (resumed.id, resumed.history[0].content) == ("s_old", "I sold the piano")
    assert await default.last_thread(peer="ann") == "t"
    with sqlite3.connect(thoth_home / "working" / "sessions.db") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (len(MIGRATIONS),)
        assert db.execute("SELECT agent FROM sessions WHERE session_id = 's_old'").fetchone() == ("default",)


async def test_an_agent_reaps_only_its_own_idle_sessions_and_its_lines_name_it(make_runtime, thoth_home):
    a = make_runtime({"working": working}, config={"thoth": {"agent": "a"}})
    b = make_runtime({"working": working}, config={"thoth": {"agent": "b"}})
    await a.turn("hello from a", peer="ann", thread="t")
    await a.drain()  # else b, in this same process, would replay a's journaled turn while a still writes it
    await b.turn("hello from b", peer="ann", thread="t")
    await b.drain()
    for runtime in (a, b):
        working.state(runtime).live.clear()  # as if both processes had exited
        runtime.sessions.clear()
    later = time.time() + 31 * 60
    reaped = await a.reap_idle(now=later)
    assert [(s.agent, s.peer, s.thread) for s in reaped] == [("a", "ann", "t")]
    assert [s.agent for s in await b.reap_idle(now=later)] == ["b"]
    [line] = [e for e in read_transcript(working.state(a).store.path_of(reaped[0])) if e["type"] == "turn"]
    assert (line["agent"], line["user"]) == ("a", "hello from a")
