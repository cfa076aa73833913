"""The scale-out bench, smaller: real worker processes on one PostgreSQL, duplicates, retries and a kill."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "scale_workers.py"


@pytest.mark.skipif(not BENCH.exists(), reason="the bench folder is not in this checkout")
def test_three_workers_one_killed_answer_every_event_once_in_order(storage_url, monkeypatch):
    for name in ("THOTH_HOME", "THOTH_CONFIG", "THOTH_STORAGE_URL"):
        monkeypatch.delenv(name, raising=False)
    spec = importlib.util.spec_from_file_location("scale_workers", BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.run(40, 4, 3, storage_url=storage_url, duplicates=0.3, retries=0.2, timeout=45)
    assert result["workers_killed"] == 1 and result["duplicate_deliveries"] > 0, result
    assert result["retries_of_acked_events"] > 0, result
    lost = {key: result[key] for key in ("replies_lost", "duplicate_replies", "out_of_order", "stuck_placeholders")}
    assert lost == dict.fromkeys(lost, 0), result
    assert result["answered_turns"] == 40 and result["episodes_lost"] == 0, result
