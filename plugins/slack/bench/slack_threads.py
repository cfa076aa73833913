"""Slack frontend latency: N threads mention the agent at once; prints JSON.

Each turn goes through the real Bolt `App.dispatch` (signed), the runtime's loop, and the real
`WebClient` against the fake Web API on 127.0.0.1, with the replay model answering after a
fixed model delay. Reports the time from dispatch to the final chat.update per thread, for one
thread alone and for N at once: if threads blocked each other, the N-thread median would grow
about N-fold.

    .venv/bin/python plugins/slack/bench/slack_threads.py [--threads 20] [--model-delay 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path

import thoth_slack.plugin
from thoth_slack.bridge import SlackBridge
from thoth_slack.settings import load_settings
from thoth_slack.testing import SECRET, FakeSlackAPI, Harness, mention

from thoth_core.testing import make_test_runtime

REPLY = "Deploy from main once the checks pass, then watch the dashboards for ten minutes."


def run(threads: int, model_delay: float, fake: FakeSlackAPI, home: Path, base: int) -> list[float]:
    words = len(REPLY.split())
    config = {
        "plugins": {
            "slack": {
                "bot_token": {"$env": "SLACK_BOT_TOKEN"},
                "signing_secret": {"$env": "SLACK_SIGNING_SECRET"},
                "api_url": fake.url,
                "stream_interval": 0.1,
            }
        },
        "models": {"replay": {"rules": [{"reply": REPLY}], "delay": model_delay / words}},
    }
    runtime = make_test_runtime(home, {"slack": thoth_slack.plugin}, config=config)
    bridge = SlackBridge(runtime, load_settings(runtime, http=True))
    bridge.start()
    slack = Harness(bridge, fake)
    latencies = [0.0] * threads

    def one(i: int) -> None:
        ts = f"{base + i}.000100"
        started = time.perf_counter()
        slack.send(mention(f"how do we deploy? ({i})", ts=ts, user=f"U{i}"), wait=False)
        fake.wait_for(
            "chat.update",
            lambda p: (
                p.get("text") == REPLY
                and any(q.get("thread_ts") == ts and q["_ts"] == p["ts"] for q in fake.calls_to("chat.postMessage"))
            ),
            timeout=60,
        )
        latencies[i] = time.perf_counter() - started

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    bridge.stop()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--model-delay", type=float, default=0.2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    os.environ.update(SLACK_BOT_TOKEN="xoxb-bench", SLACK_SIGNING_SECRET=SECRET)  # `signed` uses SECRET
    fake = FakeSlackAPI()
    with tempfile.TemporaryDirectory() as home:
        alone = [run(1, args.model_delay, fake, Path(home), 1_700_000_000 + r * 1000)[0] for r in range(args.repeat)]
        together = run(args.threads, args.model_delay, fake, Path(home), 1_800_000_000)
    fake.close()
    result = {
        "threads": args.threads,
        "model_delay_s": args.model_delay,
        "one_thread_median_s": round(statistics.median(alone), 3),
        "concurrent_median_s": round(statistics.median(together), 3),
        "concurrent_max_s": round(max(together), 3),
        "ratio_concurrent_to_one": round(statistics.median(together) / statistics.median(alone), 2),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
