"""Blackboard benchmark: publish-to-receive latency and throughput, in-process vs Redis (JSON).

Usage: python bench/blackboard.py [--n 2000]. Starts its own redis-server on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from thoth_blackboard.memory import InProcessBoard
from thoth_blackboard.redis_board import RedisBoard
from thoth_blackboard.testing import RedisServer


async def measure(board, n: int) -> dict[str, float]:
    """Latency: one publish at a time, timed until the subscriber has it. Throughput: a burst."""
    subscription = await board.subscribe("bench:*")
    stream = subscription.__aiter__()
    latencies = []
    for i in range(n):
        started = time.perf_counter()
        await board.publish(f"bench:{i % 50}", "x" * 64)
        await stream.__anext__()
        latencies.append((time.perf_counter() - started) * 1000)
    burst = await board.subscribe("burst:*")
    received = 0

    async def drain() -> None:
        nonlocal received
        async for _ in burst:
            received += 1
            if received == n:
                return

    reader = asyncio.create_task(drain())
    started = time.perf_counter()
    for i in range(n):
        await board.publish(f"burst:{i % 50}", "x" * 64)
    await reader
    seconds = time.perf_counter() - started
    await subscription.close()
    await burst.close()
    latencies.sort()
    return {
        "latency_ms_median": round(statistics.median(latencies), 4),
        "latency_ms_p95": round(latencies[int(0.95 * len(latencies)) - 1], 4),
        "throughput_per_s": round(n / seconds),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    result: dict[str, object] = {"n": args.n, "in_process": await measure(InProcessBoard(), args.n)}
    if shutil.which("redis-server"):
        with tempfile.TemporaryDirectory() as directory:
            server = RedisServer(Path(directory))
            server.start()
            try:
                board = RedisBoard(server.url, namespace="bench")
                result["redis"] = await measure(board, args.n)
                await board.close()
            finally:
                server.kill()
        result["redis_over_in_process_median"] = round(
            result["redis"]["latency_ms_median"] / result["in_process"]["latency_ms_median"], 1
        )  # type: ignore[index]
    else:
        result["redis"] = "skipped: redis-server not installed"
    result["targets"] = {"in_process_median_ms": 1, "redis_median_ms": 5}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
