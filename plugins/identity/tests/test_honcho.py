"""The Honcho backend: the real honcho-ai SDK against a fake Honcho HTTP server on 127.0.0.1."""

from __future__ import annotations

import logging
import threading

import pytest
from thoth_identity import plugin
from thoth_identity.fake_honcho import FakeHoncho, free_port
from thoth_identity.honcho_backend import session_id
from thoth_identity.outbox import Outbox
from thoth_identity.plugin import backend_for
from thoth_identity.settings import load_settings
from thoth_identity.store import IdentityStore

from thoth_core import ConfigError
from thoth_core.testing import check_layer_plugin, context_for, make_test_runtime


def honcho_config(url, **extra):
    table = {"base_url": url, "workspace": "test", "write_timeout": 1.0, "write_retries": 0, **extra}
    return {"plugins": {"identity": table}}


class ThreadRecordingStore(IdentityStore):
    """The real store, noting which thread reads the Honcho fallback cache."""

    def __init__(self, path):
        super().__init__(path)
        self.cache_threads = []

    def cache_get(self, *args):
        self.cache_threads.append(threading.current_thread())
        return super().cache_get(*args)


def user_model(assembly):
    return [b for b in assembly.blocks if b.tag == "user-model"]


def answered_in_time(assembly):
    """The identity call gave its block before the runtime's deadline cut it off (a late one is a timeout)."""
    [call] = [c for c in assembly.calls if c.plugin == "identity"]
    return call.status == "ok"


async def test_ingest_and_dialectic(make_runtime, honcho_server, monkeypatch, caplog):
    monkeypatch.setenv("HONCHO_TEST_KEY", "secret-key")
    config = honcho_config(honcho_server.url)
    config["plugins"]["identity"]["api_key"] = {"$env": "HONCHO_TEST_KEY"}
    runtime = make_runtime({"identity": plugin}, config=config)
    assert backend_for(runtime).name == "honcho"
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        await runtime.turn("I keep bees in my garden", peer="ann", thread="t1")
        await runtime.drain()
    assert caplog.text == ""  # a peer Honcho has not met yet (404) is not a failure
    [(_, path, body, headers)] = honcho_server.calls(r"POST .*/sessions/[^/]+/messages$")
    assert path == f"/v3/workspaces/test/sessions/{session_id('ann', 't1')}/messages"
    sent = [(m["content"], m["peer_id"]) for m in body["messages"]]
    assert sent == [("I keep bees in my garden", "ann"), ("ok", "thoth")]
    assert all(m["created_at"].startswith("20") for m in body["messages"])  # the turn's time, kept through the outbox
    assert headers["Authorization"] == "Bearer secret-key"
    assert honcho_server.sessions[("test", session_id("ann", "t1"))]["peers"] >= {"ann", "thoth"}

    assembly = await context_for(runtime, "How are my bees doing?", peer="ann", thread="t")
    [block] = user_model(assembly)
    assert "What I know about ann: ann said: I keep bees in my garden" in block.text
    _, _, chat, _ = honcho_server.calls(r"POST .*/peers/ann/chat")[-1]
    assert chat == {"query": "How are my bees doing?", "stream": False}


async def test_hanging_server_falls_back_to_the_last_good_answer_in_time(make_runtime, honcho_server, caplog):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    await runtime.turn("I keep bees in my garden", peer="ann", thread="t")
    await runtime.drain()
    await context_for(runtime, "bees?", peer="ann", thread="t")  # a good answer, cached
    honcho_server.mode = "hang"
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        assembly = await context_for(runtime, "How are my bees doing?", peer="ann", thread="t")
    assert answered_in_time(assembly)  # the server never answers: the fallback came inside the deadline
    [block] = user_model(assembly)
    assert "memory service unavailable now" in block.text and "I keep bees in my garden" in block.text
    assert "Honcho dialectic for peer ann failed (no answer in time); using the last good answer" in caplog.text


async def test_hanging_server_without_a_good_answer_uses_the_cached_representation(make_runtime, honcho_server):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    backend = backend_for(runtime)
    backend.store.close()
    backend.store = ThreadRecordingStore(backend.store.path)
    backend.outbox = Outbox(backend.store)
    await runtime.turn("I keep bees in my garden", peer="ann", thread="t")
    await runtime.drain()  # ingest refreshed the cached representation
    honcho_server.mode = "hang"
    assembly = await context_for(runtime, "bees?", peer="ann", thread="t")
    assert answered_in_time(assembly)
    [block] = user_model(assembly)
    assert "- ann said: I keep bees in my garden" in block.text
    assert backend.store.cache_threads and threading.main_thread() not in backend.store.cache_threads  # off the loop


async def test_reads_never_create_peers_or_start_llm_work(make_runtime, honcho_server):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    assembly = await context_for(runtime, "hello there", peer="stranger", thread="t")
    assert not honcho_server.calls(r"/chat$") and ("test", "stranger") not in honcho_server.peers
    assert honcho_server.calls(r"POST .*/peers/list$")  # looked up, not created
    assert user_model(assembly) == []  # nothing known, and nothing failed: no block
    status = await runtime.status(peer="stranger")
    assert status[0]["pending_ingest"] == 0 and ("test", "stranger") not in honcho_server.peers


@pytest.mark.parametrize("mode", ["429", "500", "503"])
async def test_rate_limited_or_failing_server_is_not_retried_and_falls_back(make_runtime, honcho_server, mode, caplog):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
    await runtime.turn("I keep bees", peer="ann", thread="t")
    await runtime.drain()
    good = await context_for(runtime, "bees?", peer="ann", thread="t")  # an answer to fall back on (the peer exists)
    [answer] = [line for line in user_model(good)[0].text.splitlines() if line.startswith("What I know about ann:")]
    honcho_server.mode, honcho_server.only = mode, r"/chat$"
    before = len(honcho_server.calls(r"/chat$"))
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        assembly = await context_for(runtime, "bees?", peer="ann", thread="t")
    assert answered_in_time(assembly)
    assert len(honcho_server.calls(r"/chat$")) == before + 1  # max_retries=0 inside the pre-spawn call
    [block] = user_model(assembly)
    assert "- name: Ann" in block.text and answer in block.text and "memory service unavailable now" in block.text
    expected = "RateLimitError: Rate limit exceeded" if mode == "429" else "ServerError: Internal Server Error"
    assert f"Honcho dialectic for peer ann failed ({expected}); using the last good answer" in caplog.text


async def test_server_down_at_start_up_then_back(make_runtime, caplog):
    server = FakeHoncho(port=free_port())  # not listening yet
    runtime = make_runtime({"identity": plugin}, config=honcho_config(server.url))
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        result = await runtime.turn("I keep bees", peer="ann", thread="t")
        await runtime.drain()
    assert result.reply.text == "ok" and runtime.writes.unsaved == []  # the turn is kept: in the outbox
    assert "Honcho dialectic for peer ann failed (cannot connect to Honcho at" in caplog.text
    assert "2 message(s) wait in the outbox" in caplog.text
    assert (await runtime.status(peer="ann"))[0]["pending_ingest"] == 2
    server.start()
    try:
        await runtime.turn("and two hives now", peer="ann", thread="t")
        await runtime.drain()
        contents = [m["content"] for m in server.messages]
        assert contents == ["I keep bees", "ok", "and two hives now", "ok"]  # the kept messages went first
        [block] = user_model(await context_for(runtime, "how are the hives?", peer="ann", thread="t"))
        assert "memory service unavailable" not in block.text and "two hives" in block.text
    finally:
        server.stop()


async def test_the_outbox_outlives_the_process_and_forget_erases_it(make_runtime, caplog):
    server = FakeHoncho(port=free_port())  # down
    config = honcho_config(server.url)
    first = make_runtime({"identity": plugin}, config=config)
    await first.turn("I keep bees", peer="ann", thread="t")
    await first.turn("I keep goats", peer="bob", thread="t")
    await first.drain()
    await first.aclose()
    server.start()
    try:
        second = make_runtime({"identity": plugin}, config=config)
        receipt = await plugin.forget(peer="bob", thread=None, workspace="default", runtime=second, wait=0)
        # erased from the outbox, or (when the start-up send was quicker) deleted in Honcho
        assert receipt.get("unsent_messages", 0) + receipt.get("honcho_messages_queued", 0) == 2
        backend_for(second).flush()
        assert [m["content"] for m in server.messages] == ["I keep bees", "ok"]  # sent at start-up, bob's erased
        assert (await second.status(peer="ann"))[0]["pending_ingest"] == 0
    finally:
        server.stop()


async def test_messages_waiting_for_honcho_travel_in_an_export_and_are_sent_once(make_runtime, tmp_path):
    server = FakeHoncho(port=free_port())  # down: the turn's messages wait in the outbox
    first = make_runtime({"identity": plugin}, config=honcho_config(server.url))
    await first.turn("I keep bees", peer="ann", thread="t")
    await first.drain()
    assert backend_for(first).store.held_peers() == [("default", "ann")]  # a bundle exports ann, though only waiting
    document = backend_for(first).export("default", "ann", local_only=True)
    assert [(m["role"], m["content"]) for m in document["outbox"]] == [("user", "I keep bees"), ("assistant", "ok")]
    await first.aclose()
    server.start()
    elsewhere = make_test_runtime(tmp_path / "elsewhere", {"identity": plugin}, config=honcho_config(server.url))
    embedded = make_test_runtime(tmp_path / "embedded", {"identity": plugin})
    try:
        backend = backend_for(elsewhere)
        assert backend.import_document(document, workspace="default", peer="ann")["queued_messages"] == 2
        assert [m["content"] for m in server.messages] == ["I keep bees", "ok"]
        assert backend.import_document(document, workspace="default", peer="ann")["queued_messages"] == 0
        assert [m["content"] for m in server.messages] == ["I keep bees", "ok"]  # sent once
        kept = backend_for(embedded).import_document(document, workspace="default", peer="ann")
        assert kept["messages"] == 2  # without Honcho they are the embedded backend's own messages
    finally:
        await elsewhere.aclose()
        await embedded.aclose()
        server.stop()


async def test_a_refused_key_is_named_and_not_retried(make_runtime, honcho_server, caplog):
    honcho_server.api_key = "the-right-key"
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    with caplog.at_level(logging.WARNING, logger="thoth_identity"):
        await runtime.turn("/remember my name is Ann", peer="ann", thread="t")
        for text in ("I keep bees", "and goats"):
            await runtime.turn(text, peer="ann", thread="t")
        await runtime.drain()
        [block] = user_model(await context_for(runtime, "bees?", peer="ann", thread="t"))
    assert "- name: Ann" in block.text and "memory service unavailable now" in block.text
    assert "refused the API key (401 Unauthorized" in caplog.text and "not retried" in caplog.text
    assert "cannot connect" not in caplog.text
    assert len(honcho_server.calls(r"/messages$")) <= 1  # one refusal, then nothing is sent
    status = (await runtime.status(peer="ann"))[0]
    assert status["pending_ingest"] == 4 and "401 Unauthorized" in status["honcho_error"]
    receipt = await runtime.forget(peer="ann")
    assert receipt["identity"]["honcho_unauthorized"] == 1 and "honcho_unreachable" not in receipt["identity"]


async def test_forget_deletes_sessions_and_conclusions_with_a_receipt(make_runtime, honcho_server):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    for thread in ("t1", "t2"):
        await runtime.turn(f"I keep bees ({thread})", peer="ann", thread=thread)
    await runtime.turn("I keep goats", peer="bob", thread="t1")
    await runtime.turn("/remember my name is Ann", peer="ann", thread="t1")
    await runtime.drain()
    backend = backend_for(runtime)
    backend.flush()
    document = backend.export("default", "ann")
    assert {s["id"] for s in document["honcho"]["sessions"]} == {session_id("ann", "t1"), session_id("ann", "t2")}
    assert any(c["content"] == "ann's name: Ann" for c in document["honcho"]["conclusions"])
    assert [f["object"] for f in document["facts"]] == ["Ann"]

    receipt = await runtime.forget(peer="ann")
    assert receipt == {
        "identity": {
            "honcho_sessions_queued": 2,  # Honcho answers 202: its queue deletes their messages and conclusions
            "honcho_messages_queued": 4,
            "honcho_conclusions_queued": 4,
            "honcho_conclusions_deleted": 1,  # the /remember one, in no session: Thoth deletes it itself
            "honcho_peer_kept": 1,  # no route deletes a peer
            "facts": 1,
            "cached_answers": 1,
        }
    }
    assert not [c for c in honcho_server.conclusions.values() if "ann" in (c["observed_id"], c["observer_id"])]
    assert [m["content"] for m in honcho_server.messages] == ["I keep goats", "ok"]  # bob's stay
    assert user_model(await context_for(runtime, "bees?", peer="bob", thread="t1"))


async def test_reflection_updates_become_agent_authored_conclusions(make_runtime, honcho_server):
    runtime = make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url))
    session = await runtime.session(peer="ann", thread="t")
    await plugin.reflection_result(
        result={"run_id": "r1", "user_model_updates": {"ann": ["Ann prefers examples"]}}, session=session
    )
    backend_for(runtime).flush()
    [conclusion] = honcho_server.conclusions.values()
    assert (conclusion["observer_id"], conclusion["observed_id"], conclusion["content"]) == (
        "thoth",
        "ann",
        "Ann prefers examples",
    )
    assert backend_for(runtime).store.recent_observations("default", "ann", limit=3)[0]["author"] == "agent"


async def test_conformance_kit(make_runtime, honcho_server):
    await check_layer_plugin(make_runtime({"identity": plugin}, config=honcho_config(honcho_server.url)), "identity")


def test_the_key_is_never_a_value_in_the_file(make_runtime):
    runtime = make_runtime(config={"plugins": {"identity": {"base_url": "http://127.0.0.1:9", "api_key": "hc-123"}}})
    with pytest.raises(ConfigError, match=r"plugins.identity.api_key: never store the key in the file"):
        load_settings(runtime)


def test_bad_settings_name_the_key(make_runtime):
    runtime = make_runtime(config={"plugins": {"identity": {"backend": "honcho"}}})
    with pytest.raises(ConfigError, match="plugins.identity.base_url: the honcho backend needs base_url"):
        load_settings(runtime)
    runtime = make_runtime(config={"plugins": {"identity": {"dialectic_timeout": 2.0}}})
    with pytest.raises(ConfigError, match="dialectic_timeout: must be positive and below the layer deadline"):
        load_settings(runtime)
