"""Outbox claims end with their claimer: a killed process's rows go out at once, a live one's stay its own."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from thoth_identity import plugin
from thoth_identity.fake_honcho import FakeHoncho
from thoth_identity.outbox import LEASE_SECONDS, Outbox
from thoth_identity.plugin import backend_for
from thoth_identity.store import IdentityStore

from thoth_core.config import Config

pytestmark = pytest.mark.slow  # spawns thoth processes

CLAIMER = """
import sys, time
from thoth_core.config import Config
from thoth_identity.outbox import Outbox
from thoth_identity.store import IdentityStore
url = sys.argv[2] or None
store = IdentityStore(__import__("pathlib").Path(sys.argv[1]), Config(data={"storage": {"url": url}} if url else {}))
outbox = Outbox(store)  # kept: with PostgreSQL it holds the claimer's lock while it lives
print(len(outbox.claim()), flush=True)
time.sleep(120)
"""


@pytest.fixture(params=["sqlite", "postgres"])
def storage_url_or_none(request: pytest.FixtureRequest) -> str | None:
    """Where the outbox lives: an SQLite file, or the shared PostgreSQL."""
    return None if request.param == "sqlite" else request.getfixturevalue("storage_url")


def open_store(path: Path, url: str | None) -> IdentityStore:
    return IdentityStore(path, Config(data={"storage": {"url": url}} if url else {}))


def claiming_child(path: Path, url: str | None) -> subprocess.Popen[str]:
    """A process that claims the outbox's rows and then holds them (until it is killed)."""
    child = subprocess.Popen([sys.executable, "-c", CLAIMER, str(path), url or ""], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "2"  # it holds both rows now
    return child


def test_a_killed_claimers_rows_are_claimed_again_at_once_and_a_live_ones_are_not(tmp_path, storage_url_or_none):
    path = tmp_path / "identity.db"
    store = open_store(path, storage_url_or_none)
    outbox = Outbox(store)
    try:
        outbox.put("default", "ann", "t", [("turn-1", "user", "I keep bees", 1.0), ("turn-1", "assistant", "ok", 2.0)])
        child = claiming_child(path, storage_url_or_none)
        try:
            assert outbox.claim() == []  # alive: its claim stands
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
        started = time.monotonic()
        assert [row["content"] for row in outbox.claim()] == ["I keep bees", "ok"]
        assert time.monotonic() - started < LEASE_SECONDS / 10  # at once, not when the lease runs out
    finally:
        outbox.close()
        store.close()


def test_a_clean_exit_gives_its_claims_back(tmp_path, storage_url_or_none):
    store = open_store(tmp_path / "identity.db", storage_url_or_none)
    leaving, staying = Outbox(store), Outbox(store)
    try:
        staying.put("default", "ann", "t", [("turn-1", "user", "I keep bees", 1.0), ("turn-1", "assistant", "ok", 2.0)])
        assert len(leaving.claim()) == 2 and staying.claim() == []
        leaving.close()
        assert len(staying.claim()) == 2
    finally:
        staying.close()
        store.close()


def test_a_thoth_ask_killed_while_honcho_hangs_leaves_its_messages_to_the_next_process(
    thoth_env, thoth_home, fake_anthropic, storage_url_or_none, make_runtime
):
    fake_anthropic.replies = ["Noted."]
    honcho = FakeHoncho().start()
    honcho.mode = "hang"
    config = tmp_config = thoth_env / "thoth.toml"
    tmp_config.write_text(
        textwrap.dedent(
            f"""
            [plugins.identity]
            base_url = "{honcho.url}"
            workspace = "test"
            write_timeout = 60.0
            write_retries = 0
            """
        )
    )
    env = {
        **os.environ,
        "THOTH_CONFIG": str(config),
        "THOTH_LOAD_PLUGINS": "identity,anthropic",
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": "test-key",
        **({"THOTH_STORAGE_URL": storage_url_or_none} if storage_url_or_none else {}),
    }
    script = Path(sys.executable).with_name("thoth")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]
    ask = subprocess.Popen([*command, "ask", "I keep bees", "--peer", "ann", "--thread", "t"], env=env)
    store = open_store(thoth_home / "identity" / "identity.db", storage_url_or_none)
    try:
        deadline = time.monotonic() + 60
        while not store.rows("SELECT id FROM honcho_outbox WHERE claimed_by IS NOT NULL"):
            assert ask.poll() is None and time.monotonic() < deadline, "the ask never claimed its messages"
            time.sleep(0.05)
        os.kill(ask.pid, signal.SIGKILL)  # while its send hangs in Honcho
        ask.wait()
        honcho.mode = "ok"
        storage = {"storage": {"url": storage_url_or_none}} if storage_url_or_none else {}
        table = {"base_url": honcho.url, "workspace": "test", "write_timeout": 5.0, "write_retries": 0}
        started = time.monotonic()
        runtime = make_runtime({"identity": plugin}, config={**storage, "plugins": {"identity": table}})
        backend = backend_for(runtime)
        while [m["content"] for m in honcho.messages] != ["I keep bees", "Noted."]:
            backend.flush(5)
            assert time.monotonic() - started < LEASE_SECONDS / 4, f"not delivered: {honcho.messages}"
            time.sleep(0.1)
    finally:
        if ask.poll() is None:
            ask.kill()
        store.close()
        honcho.stop()
