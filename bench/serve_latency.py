"""Request latency of a warm `thoth serve`: recall, context, remember and a streamed turn over HTTP; prints JSON.

Starts `thoth serve --port 0` on a fresh agent home made by `thoth init` (the replay model, the
layers installed here), remembers a few facts and sends one warm-up request of each kind, then
times N requests of each over one keep-alive connection: the client's wall time (median and p95,
ms) and, for turns, the time to the first SSE `delta`. The service's own `/v1/metrics` medians are
printed beside them (server-side time, without HTTP). Compare with `thoth recall` / `thoth context`
as processes (bench/cold_start.py): what a warm service saves is start-up and model/embedder loading.

    .venv/bin/python bench/serve_latency.py [--n 50] [--json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from thoth_serve.metrics import p95
from thoth_serve.testing import Server, make_home

FACTS = ["I live in Oslo", "my name is Ada", "I work at Acme as a potter", "my sister Ann lives in Rome"]
QUERIES = ["where do I live", "Ada", "what is my job", "sister", "Rome", "potter"]


def timed(connection: http.client.HTTPConnection, method: str, path: str, body: Any = None) -> tuple[float, Any]:
    """(seconds, decoded body) of one request on a kept-alive connection."""
    started = time.perf_counter()
    payload = json.dumps(body).encode() if body is not None else None
    headers = {"Content-Type": "application/json"} if payload else {}
    connection.request(method, path, body=payload, headers=headers)
    response = connection.getresponse()
    raw = response.read()
    assert response.status == 200, raw[:300]
    return time.perf_counter() - started, json.loads(raw)


def first_byte(connection: http.client.HTTPConnection, path: str, text: str) -> tuple[float, float]:
    """(seconds to the first `delta` event, seconds to the end) of one streamed turn."""
    started = time.perf_counter()
    body = json.dumps({"text": text}).encode()
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    first = None
    while True:
        line = response.readline()
        if not line:
            break
        if first is None and line.startswith(b"event: delta"):
            first = time.perf_counter() - started
    return first or 0.0, time.perf_counter() - started


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 2), "p95_ms": round(p95(ms), 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="requests of each kind")
    parser.add_argument("--json", action="store_true", help="only the JSON line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="thoth-serve-bench-") as folder:
        home = make_home(Path(folder))
        server = Server(home)
        try:
            host, port = server.url.removeprefix("http://").rsplit(":", 1)
            connection = http.client.HTTPConnection(host, int(port), timeout=60)
            for fact in FACTS:
                timed(connection, "POST", "/v1/peers/ada/memories", {"text": fact})
            timed(connection, "GET", "/v1/peers/ada/recall?q=warm&k=8")  # the embedder's first query
            timed(connection, "POST", "/v1/peers/ada/context", {"message": "warm up"})
            results: dict[str, list[float]] = {"recall": [], "context": [], "remember": [], "turn": []}
            firsts: list[float] = []
            for i in range(args.n):
                query = QUERIES[i % len(QUERIES)].replace(" ", "+")
                results["recall"].append(timed(connection, "GET", f"/v1/peers/ada/recall?q={query}&k=8")[0])
                message = {"message": f"{QUERIES[i % len(QUERIES)]}? ({i})"}
                results["context"].append(timed(connection, "POST", "/v1/peers/ada/context", message)[0])
                note = {"text": f"note: bench note {i}"}
                results["remember"].append(timed(connection, "POST", "/v1/peers/ada/memories", note)[0])
                first, whole = first_byte(connection, "/v1/peers/ada/turns", f"hello {i}")
                firsts.append(first)
                results["turn"].append(whole)
            _, metrics = timed(connection, "GET", "/v1/metrics")
        finally:
            server.stop()
    out = {
        "client": {kind: summary(values) for kind, values in results.items()} | {"turn_first_byte": summary(firsts)},
        "server": metrics["latency"],
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(out) if args.json else json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
