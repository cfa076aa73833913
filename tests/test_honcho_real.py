"""The identity layer against a real Honcho server (`../shared/honcho-real`): cold, hung, down, auth, import, forget.

One server per test session, started fresh (so the first test meets a cold server) by
`start DIR` with DIR outside the clone (`thoth_identity.honcho_real.server_dir`), stopped at
the end. Each test uses its own Honcho workspace. Skipped only where `../shared/honcho-real`
is absent; a start that fails is an error naming the log.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from honcho import Honcho
from thoth_identity import honcho_real, plugin
from thoth_identity.checks import honcho_checks
from thoth_identity.fake_honcho import free_port
from thoth_identity.honcho_backend import session_id
from thoth_identity.honcho_data import left_in_honcho
from thoth_identity.plugin import backend_for, layer_for

from thoth_core import ThothError
from thoth_core.testing import context_for

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = honcho_real.scripts_folder(REPO)
DEADLINE = 1.5

pytestmark = pytest.mark.skipif(not (SCRIPTS / "start").exists(), reason=f"{SCRIPTS} is absent (no real Honcho here)")


@pytest.fixture(scope="session")
def honcho_server():
    """A real Honcho started fresh for this session: (url, DIR)."""
    folder = honcho_real.server_dir()
    try:
        url = honcho_real.fresh_start(SCRIPTS, folder)
    except honcho_real.HonchoRealError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield url, folder
    honcho_real.stop(SCRIPTS, folder)


def config(url, workspace, **extra):
    table = {"base_url": url, "workspace": workspace, "write_timeout": 2.0, "write_retries": 0, **extra}
    return {"plugins": {"identity": table}}


def new_workspace():
    return f"t{uuid.uuid4().hex[:10]}"


def user_model(assembly):
    blocks = [b for b in assembly.blocks if b.tag == "user-model"]
    [call] = [c for c in assembly.calls if c.plugin == "identity"]
    assert call.status == "ok" and call.seconds < DEADLINE, call
    return blocks


def wait_until(check, timeout=30.0):
    until = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < until, "timed out waiting for Honcho"
        time.sleep(0.3)


def sent_everything(backend):
    backend.writer.submit(backend._send_waiting)
    backend.flush()
    return backend.outbox.waiting() == 0


def messages_in(url, workspace, peer, thread):
    honcho = Honcho(base_url=url, workspace_id=workspace)
    return [m.content for m in honcho.session(session_id(peer, thread)).messages()]


async def test_a_cold_server_first_turn_gets_the_block_in_time(make_runtime, honcho_server):
    url, _ = honcho_server
    workspace = new_workspace()
    first = make_runtime({"identity": plugin}, config=config(url, workspace))
    await first.turn("/remember my name is Ann", peer="ann", thread="t")
    await first.turn("I keep bees in my garden", peer="ann", thread="t")
    await first.drain()
    await first.aclose()
    second = make_runtime({"identity": plugin}, config=config(url, workspace))  # a fresh process: nothing warm
    [block] = user_model(await context_for(second, "How are my bees?", peer="ann", thread="t"))
    assert "- name: Ann" in block.text
    assert layer_for(second).last_kind in ("live", "fallback")


async def test_reads_never_create_peers(make_runtime, honcho_server):
    url, _ = honcho_server
    workspace = new_workspace()
    runtime = make_runtime({"identity": plugin}, config=config(url, workspace))
    assert user_model(await context_for(runtime, "hello", peer="stranger", thread="t")) == []
    assert [p.id for p in Honcho(base_url=url, workspace_id=workspace).peers()] == []


async def test_a_hung_server_gives_the_fallback_and_the_outbox_catches_up(make_runtime, honcho_server, caplog):
    url, folder = honcho_server
    workspace = new_workspace()
    runtime = make_runtime({"identity": plugin}, config=config(url, workspace))
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
    await runtime.turn("I keep bees in my garden", peer="ann", thread="t")
    await runtime.drain()
    await context_for(runtime, "bees?", peer="ann", thread="t")  # a good answer, kept
    honcho_real.hang(folder)
    try:
        with caplog.at_level(logging.WARNING, logger="thoth_identity"):
            [block] = user_model(await context_for(runtime, "How are my bees?", peer="ann", thread="t"))
            started = time.monotonic()
            await runtime.turn("and two hives now", peer="ann", thread="t")
            await runtime.drain()
            assert time.monotonic() - started < 5.0  # the write waits at most SEND_GRACE for a hung server
        assert "- name: Ann" in block.text and "memory service unavailable now" in block.text
        assert layer_for(runtime).last_kind == "fallback"
        assert "Honcho dialectic for peer ann failed (no answer in time)" in caplog.text
    finally:
        honcho_real.resume(folder)
    backend = backend_for(runtime)
    wait_until(lambda: sent_everything(backend))
    assert messages_in(url, workspace, "ann", "t")[-2:] == ["and two hives now", "ok"]


async def test_messages_sent_while_honcho_is_down_go_out_from_the_next_process(make_runtime, honcho_server, caplog):
    url, _ = honcho_server
    workspace = new_workspace()
    down = f"http://127.0.0.1:{free_port()}"
    first = make_runtime({"identity": plugin}, config=config(down, workspace))
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        for text in ("I keep bees", "and goats", "and two hives"):
            await first.turn(text, peer="ann", thread="t")
        await first.turn("I sail", peer="bob", thread="t")
        await first.drain()
        [block] = user_model(await context_for(first, "bees?", peer="ann", thread="t"))
    assert "memory service unavailable now" in block.text
    assert "cannot connect to Honcho at" in caplog.text and "6 message(s) wait in the outbox" in caplog.text
    assert first.writes.unsaved == []
    await first.aclose()
    second = make_runtime({"identity": plugin}, config=config(url, workspace))
    receipt = await plugin.forget(peer="bob", thread=None, workspace="default", runtime=second, wait=0)
    # bob's erased from the outbox, or (when the start-up send was quicker) queued for deletion in Honcho
    assert receipt.get("unsent_messages", 0) + receipt.get("honcho_messages_queued", 0) == 2
    backend_for(second).flush()
    expected = ["I keep bees", "ok", "and goats", "ok", "and two hives", "ok"]
    assert messages_in(url, workspace, "ann", "t") == expected  # in order, once


async def test_auth_errors_say_what_they_are(make_runtime, honcho_server, caplog, monkeypatch):
    _, folder = honcho_server
    api = honcho_real.AuthApi(folder).start()
    try:
        workspace = new_workspace()
        runtime = make_runtime({"identity": plugin}, config=config(api.url, workspace))
        with caplog.at_level(logging.WARNING, logger="thoth_identity"):
            await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
            await runtime.turn("I keep bees", peer="ann", thread="t")
            await runtime.drain()
            [block] = user_model(await context_for(runtime, "bees?", peer="ann", thread="t"))
        assert "- name: Ann" in block.text and "memory service unavailable now" in block.text
        assert "refused the API key (401 Unauthorized" in caplog.text and "not retried" in caplog.text
        assert "cannot connect" not in caplog.text
        backend = backend_for(runtime)
        checks = honcho_checks(backend.settings, backend)
        assert [ok for ok, _ in checks[:2]] == [True, True] and "server 3." in checks[1][1]
        assert not checks[2][0] and "401 Unauthorized" in checks[2][1]
        with pytest.raises(ThothError, match=r"cannot export ann from Honcho: .*401 Unauthorized"):
            backend.export("default", "ann")
        receipt = await runtime.forget(peer="ann")
        assert receipt["identity"]["honcho_unauthorized"] == 1 and "honcho_unreachable" not in receipt["identity"]

        monkeypatch.setenv("HONCHO_TEST_KEY", api.key(ad=True))
        good = config(api.url, workspace, api_key={"$env": "HONCHO_TEST_KEY"})
        runtime = make_runtime({"identity": plugin}, config=good)
        backend = backend_for(runtime)
        assert all(ok for ok, _ in honcho_checks(backend.settings, backend))
    finally:
        api.stop()


def test_doctor_names_a_closed_port(make_runtime):
    runtime = make_runtime({"identity": plugin}, config=config(f"http://127.0.0.1:{free_port()}", "w"))
    [(ok, line)] = plugin.doctor_checks(runtime=runtime)
    assert not ok and line.startswith("honcho: cannot connect to http://127.0.0.1:")


async def test_export_forget_wait_then_import_restores_idempotently(make_runtime, honcho_server):
    url, _ = honcho_server
    workspace = new_workspace()
    runtime = make_runtime({"identity": plugin}, config=config(url, workspace))
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t1")
    await runtime.turn("I keep bees in my garden", peer="ann", thread="t1")
    await runtime.turn("I sail on Sundays", peer="ann", thread="t2")
    await runtime.drain()
    backend = backend_for(runtime)
    backend.flush()
    honcho = Honcho(base_url=url, workspace_id=workspace)
    wait_until(lambda: len(list(honcho.conclusions.list(filters={"observed_id": "ann"}))) >= 3)
    document = backend.export("default", "ann")
    exported = document["honcho"]
    assert {s["id"] for s in exported["sessions"]} == {session_id("ann", "t1"), session_id("ann", "t2")}

    receipt = (await runtime.forget(peer="ann", wait=60))["identity"]  # as `thoth forget --peer ann --wait`
    assert receipt["honcho_sessions_queued"] == 2 and receipt["honcho_messages_queued"] == 4
    assert receipt["honcho_peer_kept"] == 1 and "honcho_wait_timed_out" not in receipt
    assert receipt["honcho_sessions_left"] == receipt["honcho_messages_left"] == receipt["honcho_conclusions_left"] == 0
    assert left_in_honcho(backend, "default", "ann", None) == {"sessions": 0, "messages": 0, "conclusions": 0}

    added = backend.import_document(document, workspace="default", peer="ann")
    assert added["honcho_messages"] == 4 and added["honcho_conclusions"] == len(exported["conclusions"])
    assert messages_in(url, workspace, "ann", "t1") == ["I keep bees in my garden", "ok"]
    again = backend.import_document(document, workspace="default", peer="ann")
    assert again["honcho_messages"] == 0 and again["honcho_conclusions"] == 0
    left = left_in_honcho(backend, "default", "ann", None)
    assert left["messages"] == 4 and left["conclusions"] == len(exported["conclusions"])


def test_a_dialectic_the_real_honcho_answers_while_python_finalizes_does_not_abort(honcho_server, tmp_path):
    """The exit-134 case of issue 35: the dialectic, abandoned at its deadline, is answered as the process ends."""
    url, _ = honcho_server
    workspace = new_workspace()
    Honcho(base_url=url, workspace_id=workspace).peer("ann").chat("warm up")  # known, and a warm dialectic
    proxy = honcho_real.SlowProxy(url, r"/chat$", hold=True).start()  # holds it until the process finalizes
    signal = honcho_real.ExitSignal(proxy.release.set)
    config = tmp_path / "thoth.toml"
    config.write_text(
        f'[plugins.identity]\ndeadline = 5.0\ndialectic_timeout = 4.9\nbase_url = "{proxy.url}"\n'
        f'workspace = "{workspace}"\n'
    )
    env = {**os.environ, "THOTH_CONFIG": str(config), "THOTH_HOME": str(tmp_path / "home")}
    env["THOTH_LOAD_PLUGINS"] = "identity"
    codes = []
    try:
        for delay in (0.03, 0.08):  # after the last atexit callback; Honcho's answer adds some ms
            proxy.release.clear()
            signal.delay = delay
            child = [sys.executable, "-c", honcho_real.CONTEXT_THEN_FINALIZE, str(signal.port)]
            done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=60)
            assert "no answer in time" in done.stderr and '"blocks"' in done.stdout, done.stderr
            codes.append(done.returncode)
    finally:
        signal.close()
        proxy.stop()
    assert proxy.held == signal.calls == 2  # each process asked, and reached its last atexit callback
    assert codes == [0, 0]
