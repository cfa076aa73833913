"""Issue 38 item 5: `thoth serve --workers 2` on one PostgreSQL under concurrent turns through HTTP: 0 lost, 0 twice.

The load of `bench/scale_workers.py`, through the REST API instead of Slack: several client threads
each send their turns (half streamed as SSE, half as JSON) to the one port both workers accept on.
Every turn must be answered with its own scripted reply, counted once by the worker that ran it,
and, after a SIGTERM (each worker drains its writes), be in the shared store exactly once as a
current episode, with nothing left in the turn journal.
"""

from __future__ import annotations

import json
import threading
import urllib.request
from collections import Counter

import pytest
from thoth_serve.testing import make_home, sse_events

pytestmark = pytest.mark.slow
TURNS = 24
CLIENTS = 6
TOKEN = "workers-token"


def reply_for(n: int) -> str:
    return f"a-{n:04d} noted, thanks"


def test_two_workers_on_postgresql_lose_and_double_no_turn(tmp_path, storage_url, start_server):
    pytest.importorskip("thoth_episodic", reason="episodes are what is counted in the shared store")
    import psycopg

    rules = [{"match": f"q-{n:04d}\\b", "reply": reply_for(n)} for n in range(TURNS)] + [{"reply": "unscripted"}]
    home = make_home(tmp_path, replies=rules, extra=f'\n[storage]\nurl = "{storage_url}"\n')
    server = start_server(home, "--workers", "2", token=TOKEN)
    answers: dict[int, str] = {}
    failures: list[str] = []

    def client(c: int) -> None:
        for n in range(c, TURNS, CLIENTS):
            streamed = n % 2 == 0
            request = urllib.request.Request(
                server.url + f"/v1/peers/u{c}/turns",
                data=json.dumps({"text": f"q-{n:04d} please note this", "thread": f"t{c}"}).encode(),
                headers={
                    **server.headers(),
                    "Content-Type": "application/json",
                    "Accept": "text/event-stream" if streamed else "application/json",
                },
            )
            try:
                with urllib.request.urlopen(request, timeout=120) as response:
                    body = response.read().decode()
            except Exception as exc:  # noqa: BLE001 - counted as lost
                failures.append(f"q-{n:04d}: {exc}")
                continue
            if streamed:
                events = sse_events(body)
                assert events[-1][0] == "done", events
                assert "".join(d["text"] for name, d in events if name == "delta") == events[-1][1]["reply"]
                answers[n] = events[-1][1]["reply"]
            else:
                answers[n] = json.loads(body)["reply"]

    clients = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(300)
    assert failures == [] and answers == {n: reply_for(n) for n in range(TURNS)}

    turns_by_pid: dict[int, int] = {}
    for _ in range(200):  # new connections land on either worker; each reports its own count
        status, metrics = server.request("GET", "/v1/metrics")
        assert status == 200
        turns_by_pid[metrics["pid"]] = metrics["counts"].get("turn", 0)
        if len(turns_by_pid) == 2:
            break
    assert len(turns_by_pid) == 2 and sum(turns_by_pid.values()) == TURNS, turns_by_pid
    assert server.stop() == 0, server.log()

    with psycopg.connect(storage_url) as db:
        current = db.execute(
            "SELECT user_text FROM thoth_episodic.thoth_episodes WHERE superseded_at IS NULL"
        ).fetchall()
        unwritten = db.execute("SELECT count(*) FROM thoth_journal.pending").fetchone()[0]
    kept = Counter(text.split()[0] for (text,) in current if text.startswith("q-"))
    assert sorted(kept) == [f"q-{n:04d}" for n in range(TURNS)], "lost: " + str(
        sorted({f"q-{n:04d}" for n in range(TURNS)} - set(kept))
    )
    assert [text for text, count in kept.items() if count > 1] == []  # none stored twice
    assert unwritten == 0
