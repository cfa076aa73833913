"""SIGKILL during a burst of writes: the store stays readable, every acknowledged episode is there,
and the next start embeds the episodes that were still waiting for a vector."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for
from thoth_episodic.sqlite_store import SQLiteStore

from thoth_core.testing import make_test_runtime

pytestmark = pytest.mark.slow  # spawns thoth processes

WRITER = Path(__file__).with_name("crash_writer.py")


@pytest.mark.parametrize("synchronous", ["NORMAL"])  # the default; WAL + NORMAL survives a process kill
def test_sigkill_mid_burst_keeps_every_acknowledged_episode(tmp_path, synchronous):
    child = subprocess.Popen(
        [sys.executable, str(WRITER), str(tmp_path), synchronous], stdout=subprocess.PIPE, text=True
    )
    acknowledged = []
    try:
        for line in child.stdout:
            acknowledged.append(line.strip())
            if len(acknowledged) >= 150:
                break
        os.kill(child.pid, signal.SIGKILL)
        tail, _ = child.communicate(timeout=30)  # acks printed before the kill landed count too
        acknowledged += [line for line in tail.split("\n") if line]
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == -signal.SIGKILL and len(acknowledged) >= 150

    path = tmp_path / "episodic" / "episodes.db"
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.execute("INSERT INTO episodes_fts (episodes_fts) VALUES ('integrity-check')")
    assert (
        db.execute("SELECT count(*) FROM episodes_fts").fetchone()
        == db.execute("SELECT count(*) FROM episodes").fetchone()
    )
    db.close()
    store = SQLiteStore(path)
    try:
        stored = {e.id for e in store.episodes()}
        missing = [i for i in acknowledged if i not in stored]
        assert not missing, f"{len(missing)} acknowledged episodes lost"
        assert store.count() >= len(acknowledged)
    finally:
        store.close()

    memory = memory_for(make_test_runtime(tmp_path, {"episodic": plugin}))
    try:
        memory.warm_up()  # the next start embeds what the killed process had queued
        assert memory.flush(timeout=120)
        assert memory.store.unembedded(limit=1) == []
    finally:
        memory.close()
