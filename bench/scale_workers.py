"""Several Thoth workers serve one Slack app on one PostgreSQL, through duplicates, retries and a kill; prints JSON.

An agent home made by `thoth init` with `[storage] url` set (a pgserver PostgreSQL in a temp dir,
or `--storage-url`), the replay model and the fake Slack Web API on 127.0.0.1. W worker
processes (`thoth slack --http PORT`, each with its own data folder, so that only the store is
shared) sit behind a round-robin "load balancer" (this script). T threads each get a mention and
then follow-ups in the thread, sent one after the other (each once the previous was acked) to
the next live worker; some deliveries are sent twice to two workers at once (a duplicate), some
are retried with `X-Slack-Retry-Num` to another worker, and halfway through one worker is
SIGKILLed mid-run: deliveries it does not answer are retried on the others, as Slack would. With
`--restart-db`, PostgreSQL is also stopped at that moment (`pg_ctl stop -m fast`: every connection
breaks) and started again `--outage` seconds later; a delivery no worker can record then is not
acked, and is sent again, as Slack would.

Measured from the fake Slack server's chat.postMessage / chat.update calls: replies_lost (events
without a complete reply), duplicate_replies (events with more than one), out_of_order (threads
whose replies were posted in another order than their events), stuck_placeholders; and from
the store: episodes_lost (answered turns without their episode in the shared store) and
episodes_stored_twice (events whose turn has two current episodes, e.g. re-run after a kill).

    .venv/bin/python bench/scale_workers.py [--events 200] [--threads 20] [--workers 3] [--restart-db] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict
from pathlib import Path
from typing import Any

from slack_sdk.signature import SignatureVerifier
from thoth_slack.testing import SECRET, TEAM, FakeSlackAPI, event_body

THOTH = Path(sys.executable).with_name("thoth")
CHANNEL = "CBENCH"
PLACEHOLDER = "_thinking…_"
ACK_TIMEOUT = 3.0  # Slack retries a delivery not acked within 3 s


def reply_for(n: int) -> str:
    """The replay model's answer to event n."""
    return f"a-{n:04d} noted, thanks for the update"


class TimedSlack(FakeSlackAPI):
    """The fake Web API, stamping each recorded call with when it arrived."""

    def answer(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        params["_at"] = time.monotonic()
        return super().answer(method, params, headers)


class Balancer:
    """Round-robin over the live workers' ports, like a load balancer with health checks."""

    def __init__(self, ports: list[int]) -> None:
        self.ports, self.dead, self.turn = ports, set[int](), 0
        self.lock = threading.Lock()

    def pick(self, avoid: int | None = None) -> int:
        with self.lock:
            live = [p for p in self.ports if p not in self.dead] or self.ports
            choices = [p for p in live if p != avoid] or live
            self.turn += 1
            return choices[self.turn % len(choices)]


COUNTS: dict[str, int] = defaultdict(int)  # deliveries sent, by kind


def deliver(balancer: Balancer, body: str, *, port: int | None = None, retry: int = 0, attempts: int = 6) -> int:
    """POST a signed event to a worker until one acks it (each failure retried elsewhere); the acking port."""
    port = port or balancer.pick()
    COUNTS["deliveries"] += 1
    for _ in range(attempts):
        ts = str(int(time.time()))
        headers = {
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body),
        }
        if retry:
            headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/slack/events", data=body.encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=ACK_TIMEOUT) as response:
                if response.status == 200:
                    return port
        except (OSError, urllib.error.URLError):
            pass
        retry += 1
        COUNTS["retried_after_a_failed_delivery"] += 1
        port = balancer.pick(avoid=port)
    raise RuntimeError(f"no worker acked an event after {attempts} deliveries")


def make_home(
    folder: Path, storage_url: str, events: int, *, model_delay: float, claim_seconds: float, api: str
) -> Path:
    """An agent home by `thoth init`, answering with the replay model, its state in the shared store."""
    subprocess.run([str(THOTH), "init", str(folder / "agent")], check=True, capture_output=True)
    home = folder / "agent"
    rules = [{"match": f"q-{n:04d}\\b", "reply": reply_for(n)} for n in range(events)] + [{"reply": "unscripted"}]
    (home / "replay.json").write_text(json.dumps(rules))
    words = len(reply_for(0).split())
    config = (home / "thoth.toml").read_text().replace("[thoth]\n", '[thoth]\nmodel = "replay"\n', 1)
    config += (
        f'\n[storage]\nurl = "{storage_url}"\n\n'
        f'[models.replay]\nfile = "replay.json"\ndelay = {model_delay / words:.4f}\n\n'
        '[plugins.slack]\nbot_token = { "$env" = "SLACK_BOT_TOKEN" }\n'
        'signing_secret = { "$env" = "SLACK_SIGNING_SECRET" }\n'
        f'api_url = "{api}"\nstream_interval = 0.2\nclaim_seconds = {claim_seconds}\n'
    )
    (home / "thoth.toml").write_text(config)
    return home


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_workers(home: Path, count: int, plugins: str, logs: Path) -> tuple[list[subprocess.Popen[bytes]], list[int]]:
    """W `thoth slack --http PORT` processes, each with its own data folder; returns once all listen."""
    processes, ports = [], []
    for i in range(count):
        port = free_port()
        env = dict(os.environ, THOTH_HOME=str(home.parent / f"data-{i}"), THOTH_LOAD_PLUGINS=plugins)
        env.update(SLACK_BOT_TOKEN="xoxb-bench", SLACK_SIGNING_SECRET=SECRET)
        env.pop("THOTH_STORAGE_URL", None)
        with (logs / f"worker-{i}.log").open("wb") as log:
            processes.append(
                subprocess.Popen([str(THOTH), "slack", "--http", str(port)], cwd=home, env=env, stderr=log, stdout=log)
            )
        ports.append(port)
    deadline = time.monotonic() + 120
    for process, port in zip(processes, ports, strict=True):
        while not _listening(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker on port {port} did not start; see {logs}")
            time.sleep(0.1)
    return processes, ports


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


def thread_events(t: int, per_thread: list[int], base: int) -> list[dict[str, Any]]:
    """Thread t's events: a mention, then follow-ups in its thread (answered because the agent is in it)."""
    root = f"{base + t}.000100"
    events = []
    for k, n in enumerate(per_thread):
        ts = f"{base + t}.{(k + 1) * 100:06d}"
        event = {"type": "message", "channel_type": "channel", "user": f"UB{t:03d}", "channel": CHANNEL, "ts": ts}
        if k == 0:
            event |= {"type": "app_mention", "text": f"<@UBOT> q-{n:04d} starting"}
        else:
            event |= {"text": f"q-{n:04d} and then", "thread_ts": root}
        events.append(event | {"team": TEAM, "_n": n})
    return events


def send_all(
    balancer: Balancer,
    events: int,
    threads: int,
    *,
    duplicates: float,
    retries: float,
    gap: float,
    seed: int,
    on_half: Any,
) -> dict[int, float]:
    """Each thread's events in order from its own sender; returns when each event was first sent."""
    base = int(time.time()) - 3600
    plan = {t: [n for n in range(events) if n % threads == t] for t in range(threads)}
    sent: dict[int, float] = {}
    counter = {"sent": 0}
    lock = threading.Lock()

    def sender(t: int) -> None:
        rng = random.Random(seed * 1000 + t)
        for event in thread_events(t, plan[t], base):
            n = event.pop("_n")
            body = json.dumps(event_body(event))
            sent[n] = time.monotonic()
            if rng.random() < duplicates:  # the same delivery reaches two workers at once
                COUNTS["duplicate_deliveries"] += 1
                other = threading.Thread(target=deliver, args=(balancer, body), daemon=True)
                other.start()
            port = deliver(balancer, body)
            if rng.random() < retries:  # Slack retries it (no ack seen in time) to another worker
                COUNTS["retries_of_acked_events"] += 1
                deliver(balancer, body, port=balancer.pick(avoid=port), retry=1)
            with lock:
                counter["sent"] += 1
                if counter["sent"] == events // 2:
                    threading.Thread(target=on_half, daemon=True).start()
            time.sleep(gap)

    senders = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
    for s in senders:
        s.start()
    for s in senders:
        s.join()
    return sent


def replies(fake: FakeSlackAPI) -> list[dict[str, Any]]:
    """Every message posted in the bench channel with its final text and when it got it, in posting order."""
    final: dict[str, tuple[str, float]] = {}
    for update in fake.calls_to("chat.update"):
        final[update["ts"]] = (update["text"], update["_at"])
    posted = [p for p in fake.calls_to("chat.postMessage") if p["channel"] == CHANNEL]
    return [
        {
            "ts": p["_ts"],
            "thread": p.get("thread_ts"),
            **dict(zip(("text", "at"), final.get(p["_ts"], (p["text"], p["_at"])), strict=True)),
        }
        for p in posted
    ]


def wait_for_replies(fake: FakeSlackAPI, events: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    expected = {reply_for(n) for n in range(events)}
    while time.monotonic() < deadline:
        if expected <= {r["text"] for r in replies(fake)}:
            return
        time.sleep(0.25)


def measure(fake: FakeSlackAPI, events: int, threads: int, sent: dict[int, float]) -> dict[str, Any]:
    """The counts and latencies of the replies the fake Slack server recorded."""
    by_event: dict[int, list[dict[str, Any]]] = defaultdict(list)
    order: dict[str | None, list[int]] = defaultdict(list)
    partial = stuck = 0
    for reply in replies(fake):
        found = re.search(r"\ba-(\d{4})\b", reply["text"])
        if reply["text"] == PLACEHOLDER:
            stuck += 1
        elif found and reply["text"] == reply_for(int(found[1])):
            by_event[int(found[1])].append(reply)
            order[reply["thread"]].append(int(found[1]))
        else:
            partial += 1
    latencies = [by_event[n][0]["at"] - sent[n] for n in range(events) if by_event.get(n) and n in sent]
    return {
        "events": events,
        "threads": threads,
        "replies_lost": sum(1 for n in range(events) if not by_event.get(n)),
        "duplicate_replies": sum(1 for n in range(events) if len(by_event.get(n, [])) > 1),
        "out_of_order": sum(1 for seq in order.values() if seq != sorted(seq)),
        "stuck_placeholders": stuck,
        "partial_replies": partial,
        "latency_median_s": round(statistics.median(latencies), 3) if latencies else None,
        "latency_p95_s": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 3) if latencies else None,
    }


def episodes_lost(storage_url: str, homes: list[Path]) -> tuple[int, int | None, str]:
    """(answered turns, of which without an episode, where episodes were looked for)."""
    import psycopg

    with psycopg.connect(storage_url, autocommit=True) as db:
        restarted = db.execute("SELECT count(*) FROM thoth_slack.inbox WHERE attempts > 1").fetchone()[0]
        COUNTS["turns_restarted_after_takeover"] = restarted
        turns = {
            r[0]
            for r in db.execute("SELECT turn_id FROM thoth_slack.inbox WHERE state = 'done' AND turn_id IS NOT NULL")
        }
        shared = db.execute("SELECT to_regclass('thoth_episodic.thoth_episodes')").fetchone()[0]
        if shared is not None:
            kept = {r[0] for r in db.execute("SELECT DISTINCT turn_id FROM thoth_episodic.thoth_episodes")}
            COUNTS["episodes_stored_twice"] = db.execute(  # each event's text is unique: q-NNNN
                "SELECT count(*) FROM (SELECT user_text FROM thoth_episodic.thoth_episodes "
                "WHERE superseded_at IS NULL GROUP BY user_text HAVING count(*) > 1) twice"
            ).fetchone()[0]
            return len(turns), len(turns - kept), "shared store (thoth_episodic.thoth_episodes)"
    import sqlite3

    kept = set()
    for home in homes:
        for path in home.rglob("episodes.db"):
            kept |= {r[0] for r in sqlite3.connect(path).execute("SELECT turn_id FROM episodes")}
    return len(turns), len(turns - kept), "per-worker SQLite (the episodic layer is not on the shared store)"


def run(
    events: int = 200,
    threads: int = 20,
    workers: int = 3,
    *,
    storage_url: str | None = None,
    kill: bool = True,
    duplicates: float = 0.15,
    retries: float = 0.1,
    model_delay: float = 0.1,
    gap: float = 0.05,
    claim_seconds: float = 3.0,
    plugins: str = "slack,working,episodic",
    seed: int = 1,
    timeout: float = 180.0,
    keep: Path | None = None,
    restart_db: bool = False,
    outage: float = 3.0,
) -> dict[str, Any]:
    """Run the whole bench; the result as a dict (see the module docstring)."""
    folder = Path(tempfile.mkdtemp(prefix="thoth-scale-"))
    folder.chmod(0o755)
    server = None
    if restart_db and storage_url is not None:
        raise SystemExit("--restart-db restarts the bench's own PostgreSQL: leave out --storage-url")
    if storage_url is None:
        import pgserver

        from thoth_core.testing.postgres import fresh_database

        server = pgserver.get_server(folder / "pg", cleanup_mode="delete")
        storage_url = fresh_database(server)
    fake = TimedSlack()
    processes: list[subprocess.Popen[bytes]] = []
    started = time.monotonic()
    COUNTS.clear()
    try:
        home = make_home(
            folder, storage_url, events, model_delay=model_delay, claim_seconds=claim_seconds, api=fake.url
        )
        processes, ports = start_workers(home, workers, plugins, folder)
        balancer = Balancer(ports)
        killed: list[int] = []

        restarts: list[float] = []

        def restart_db_now() -> None:
            from thoth_core.testing.postgres import start_server, stop_server

            began = time.monotonic()
            stop_server(server)
            time.sleep(outage)
            start_server(server)
            restarts.append(time.monotonic() - began)

        def halfway() -> None:
            if restart_db:
                threading.Thread(target=restart_db_now, daemon=True).start()
            kill_one()

        def kill_one() -> None:
            if kill and len(processes) > 1:
                processes[0].send_signal(signal.SIGKILL)
                killed.append(processes[0].pid)
                time.sleep(0.5)  # the balancer's health check notices a little later
                balancer.dead.add(ports[0])

        began = time.monotonic()
        sent = send_all(
            balancer, events, threads, duplicates=duplicates, retries=retries, gap=gap, seed=seed, on_half=halfway
        )
        wait_for_replies(fake, events, timeout)
        wall = time.monotonic() - began
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)  # ends sessions, lets post-turn writes finish
        for process in processes:
            process.wait(60)
        result = measure(fake, events, threads, sent)
        answered, lost, where = episodes_lost(storage_url, [folder / f"data-{i}" for i in range(workers)])
        if "episodic" not in plugins.split(","):
            lost, where = None, "not measured (the episodic plugin is not loaded)"
        result |= {
            "episodes_lost": lost,
            "answered_turns": answered,
            "episodes_source": where,
            "workers": workers,
            "workers_killed": len(killed),
            "db_restarts": len(restarts),
            "db_down_s": round(restarts[0], 2) if restarts else 0.0,
            **dict(sorted(COUNTS.items())),
            "wall_s": round(wall, 2),
            "total_s": round(time.monotonic() - started, 2),
        }
        return result
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
        fake.close()
        if server is not None:
            server.cleanup()
        if keep is not None:
            shutil.copytree(folder, keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("pg"))
        shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--storage-url", default=None, help="a postgresql:// URL (default: a pgserver in a temp dir)")
    parser.add_argument("--no-kill", action="store_true", help="kill no worker")
    parser.add_argument("--restart-db", action="store_true", help="stop PostgreSQL halfway and start it again")
    parser.add_argument("--outage", type=float, default=3.0, help="seconds PostgreSQL stays down (--restart-db)")
    parser.add_argument("--model-delay", type=float, default=0.1, help="seconds the replay model takes per reply")
    parser.add_argument("--plugins", default="slack,working,episodic")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="copy the homes and worker logs here")
    parser.add_argument("--json", action="store_true", help="print one JSON line (the default prints it indented)")
    args = parser.parse_args(argv)
    result = run(
        args.events,
        args.threads,
        args.workers,
        storage_url=args.storage_url,
        kill=not args.no_kill,
        model_delay=args.model_delay,
        plugins=args.plugins,
        seed=args.seed,
        keep=args.keep,
        restart_db=args.restart_db,
        outage=args.outage,
    )
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
