"""Issue 38 item 5: `thoth serve --workers 2` on one PostgreSQL under concurrent turns through HTTP: 0 lost, 0 twice.

The load of `bench/scale_workers.py`, through the REST API instead of Slack: several client threads
each send their turns (half streamed as SSE, half as JSON, each with its own `turn_id`) to the one
port both workers accept on. Halfway through, one worker is SIGKILLed (uvicorn's supervisor starts
another); a client whose request failed sends it again with the same `turn_id`, as a client that
lost its connection would. Every turn must be answered with its own scripted reply and, after a
SIGTERM (each worker drains its writes), be in the shared store exactly once as a current episode,
with nothing left in the turn journal.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
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
    pids = worker_pids(server)
    answers: dict[int, str] = {}
    failures: list[str] = []
    retried: list[int] = []
    killed = threading.Event()

    def send(c: int, n: int) -> str:
        streamed = n % 2 == 0
        body = {"text": f"q-{n:04d} please note this", "thread": f"t{c}", "turn_id": f"q-{n:04d}"}
        request = urllib.request.Request(
            server.url + f"/v1/peers/u{c}/turns",
            data=json.dumps(body).encode(),
            headers={
                **server.headers(),
                "Content-Type": "application/json",
                "Accept": "text/event-stream" if streamed else "application/json",
            },
        )
        with urllib.request.urlopen(request, timeout=120) as response:
            answer = response.read().decode()
        if not streamed:
            return str(json.loads(answer)["reply"])
        events = sse_events(answer)
        assert events[-1][0] == "done", events
        assert "".join(d["text"] for name, d in events if name == "delta") == events[-1][1]["reply"]
        return str(events[-1][1]["reply"])

    def client(c: int) -> None:
        for n in range(c, TURNS, CLIENTS):
            for attempt in range(6):
                try:
                    answers[n] = send(c, n)
                    break
                except Exception as exc:  # noqa: BLE001 - a lost connection: sent again, same turn_id
                    retried.append(n)
                    if attempt == 5:
                        failures.append(f"q-{n:04d}: {exc}")
                    time.sleep(0.5)
            if len(answers) >= TURNS // 2 and not killed.is_set():
                killed.set()
                os.kill(pids[0], signal.SIGKILL)  # mid-run: the others' turns are in flight

    clients = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for thread in clients:
        thread.start()
    for thread in clients:
        thread.join(300)
    assert killed.is_set() and failures == [] and answers == {n: reply_for(n) for n in range(TURNS)}
    assert pids[0] not in worker_pids(server)  # the supervisor replaced the killed worker
    assert server.stop() == 0, server.log()

    with psycopg.connect(storage_url) as db:
        current = db.execute(
            "SELECT user_text FROM thoth_episodic.thoth_episodes WHERE superseded_at IS NULL"
        ).fetchall()
        unwritten = db.execute("SELECT count(*) FROM thoth_journal.pending").fetchone()[0]
    kept = Counter(text.split()[0] for (text,) in current if text.startswith("q-"))
    lost = sorted({f"q-{n:04d}" for n in range(TURNS)} - set(kept))
    assert lost == [], f"lost {lost}; {unwritten} still journaled; retried {sorted(set(retried))}"
    assert [text for text, count in kept.items() if count > 1] == []  # none stored twice
    assert unwritten == 0


def worker_pids(server) -> list[int]:
    """The pids of the two workers, as /v1/health answers on new connections."""
    seen: set[int] = set()
    for _ in range(300):
        status, health = server.request("GET", "/v1/health")
        if status == 200:
            seen.add(health["pid"])
        if len(seen) == 2:
            return sorted(seen)
        time.sleep(0.05)
    raise AssertionError(f"only workers {seen} answered")
