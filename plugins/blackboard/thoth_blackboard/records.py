"""The blackboard's memory records: the signals a peer posted on its workspace's board (`/board put`); read-only.

A post's id is `post:<key>` (a key holds one current value); its `at` is when it was published.
Only the posts the peer published are theirs: another peer's, and the agents' own, are never shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from thoth_core import MemoryRecord, hookimpl

from .board import Signal
from .state import board_for

if TYPE_CHECKING:
    from thoth_core import Runtime

LAYER = "working"  # the plugin's layer (`plugin.LAYER`); `runtime.records(layer="blackboard")` finds it by name
PREFIX = "post:"


def post_record(signal: Signal) -> MemoryRecord:
    """A signal as a record: `key = value` as text, the key and value in `meta`."""
    return {
        "layer": LAYER,
        "kind": "post",
        "id": f"{PREFIX}{signal.key}",
        "text": f"{signal.key} = {signal.value}",
        "at": float(signal.at),
        "editable": False,
        "meta": {"key": signal.key, "value": signal.value, "signal_id": signal.id},
    }


@hookimpl
async def memory_records(
    peer: str, workspace: str, runtime: Runtime, kind: str | None, limit: int, before: float | None
) -> list[MemoryRecord] | None:
    if kind not in (None, "post"):
        return None
    posts = [s for s in await board_for(runtime, workspace).list() if s.publisher == peer]
    found = [post_record(s) for s in posts if before is None or s.at < before]
    found.sort(key=lambda r: r["at"], reverse=True)
    return found[:limit]


@hookimpl
async def memory_record(record_id: str, peer: str, workspace: str, runtime: Runtime) -> MemoryRecord | None:
    if not record_id.startswith(PREFIX) or len(record_id) == len(PREFIX):
        return None
    signal = await board_for(runtime, workspace).get(record_id[len(PREFIX) :])
    if signal is None or signal.publisher != peer:
        return None
    return {**post_record(signal), "history": []}
