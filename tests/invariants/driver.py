"""The invariant test's in-process driver: one child process that runs steps on real runtimes.

Run as `python driver.py` with the agent home as working directory. It reads one JSON command a
line on stdin and answers one JSON line on stdout. Every command loads a fresh `Runtime` (as a
new process would: the journal is replayed at its first session) and closes it, so between
commands the child holds no file of the home open (a remount read-only can succeed). A native
abort kills only this child; the harness sees its return code and starts another.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import traceback
from typing import Any

from thoth_core.bundle import sections_of
from thoth_core.runtime import Runtime
from thoth_core.types import Turn

PROBE = "what do you remember about me"


async def _runtime(agent: str) -> Runtime:
    os.environ["THOTH_AGENT"] = agent
    return Runtime.load()


async def turn(peer: str, thread: str, agent: str, text: str, turn_id: str | None = None) -> dict[str, Any]:
    """One whole turn, closed as `thoth ask` closes it; `turn_id` re-runs a turn (as a Slack worker does)."""
    runtime = await _runtime(agent)
    try:
        result = await runtime.turn(text, peer=peer, thread=thread, turn_id=turn_id)
        return {"reply": result.reply.text, "model": result.reply.model}
    finally:
        await runtime.aclose()
        unsaved = runtime.unsaved
        if unsaved:
            print(json.dumps({"unsaved": unsaved}, default=str), file=sys.stderr)


async def observe(peers: list[str], agents: list[str]) -> dict[str, Any]:
    """What every layer holds after recovery, each peer's view (recall, context), and the approval queue."""
    runtime = await _runtime(agents[0])
    try:
        replayed = await runtime.recover()
        await runtime.drain()
        views: dict[str, Any] = {}
        for peer in peers:  # first: the probe sessions they open are then in the export too
            found = await runtime.recall(query=PROBE, peer=peer, workspace="default", limit=50)  # every layer's
            texts = [hit["text"] for hit in found.hits]
            session = await runtime.session(peer=peer, thread="invariants-probe")
            assembly = await runtime.context(Turn(PROBE, peer, "invariants-probe", session.workspace), session)
            views[peer] = {
                "recall": texts,
                "context": [block.text for block in assembly.blocks],
                "failed": sorted(call.plugin for call in assembly.calls if call.status != "ok"),
            }
        sections = {section.name: list(section.records) for section in sections_of(runtime)}
        listed = await runtime.call("approvals", runtime=runtime)  # as `runtime.approvals()`, with each call's outcome
        approvals = [item for _, items, _ in listed for item in items or []]
        failed = [f"{call.plugin}: {call.status} {call.error}" for _, _, call in listed if call.status != "ok"]
        return {"replayed": replayed, "sections": sections, "approvals": approvals, "views": views, "failed": failed}
    finally:
        await runtime.aclose()


async def reap(agent: str, ahead: float) -> dict[str, Any]:
    """End every session idle as of `ahead` seconds from now (reflection runs on each)."""
    runtime = await _runtime(agent)
    try:
        ended = await runtime.reap_idle(now=time.time() + ahead)
        await runtime.drain()
        return {"ended": [session.id for session in ended]}
    finally:
        await runtime.aclose()


COMMANDS = {"turn": turn, "observe": observe, "reap": reap}


def main() -> None:
    """Serve commands until stdin closes."""
    for line in sys.stdin:
        command = json.loads(line)
        name = command.pop("command")
        try:
            answer = asyncio.run(COMMANDS[name](**command))
        except Exception as exc:  # noqa: BLE001 - the harness decides what a failure means
            answer = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]}
        sys.stdout.write(json.dumps(answer, default=str) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
