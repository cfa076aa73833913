"""Session-end reflection through a real runtime: fan-out, repair, failures, hostile output, no model."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from thoth_reflection import plugin as reflection
from thoth_reflection.settings import state

from thoth_core import ConfigError, Session, hookimpl
from thoth_core.config import Config
from thoth_core.default_plugins.replay_model import ReplayModel
from thoth_core.plugins import make_plugin_manager
from thoth_core.runtime import Runtime
from thoth_core.testing import check_layer_plugin


def memory(tmp_path: Path) -> str:
    path = tmp_path / "persona" / "MEMORY.md"
    return path.read_text() if path.exists() else ""


async def test_session_end_fans_out_to_every_writer(reflecting, chat, tmp_path):
    runtime, fakes = reflecting()
    session = await chat(runtime, "How do I deploy to staging?", "Thanks, that worked.")

    text = memory(tmp_path)
    assert "Ann deploys to staging every Friday." in text
    assert "[REDACTED:github-token]" in text and "a1B2c3D4" not in text
    assert fakes["procedural"].drafts["deploy-staging"]["session"] == session.id
    assert fakes["identity"].updates == [("ann", "Prefers terse answers.")]

    items = await runtime.approvals(actor="lead")
    kinds = sorted(i["kind"] for i in items)
    assert kinds == ["persona-observation", "skill"]
    persona = next(i for i in items if i["kind"] == "persona-observation")
    assert persona["source"]["session"] == session.id and len(persona["source"]["episodes"]) == 2

    events = [e for e, _ in fakes["notices"].events]
    assert "persona_observation" in events and "approval_requested" in events

    store = state(runtime).store
    [run] = store.runs(session.id)
    assert run["status"] == "ok"
    log = [e["event"] for e in store.audit_log(run_id=run["run_id"])]
    assert log[:2] == ["run_started", "result"] and "fanout" in log and "memory_notes_written" in log
    fanout = store.audit_log(event="fanout")[0]["payload"]
    assert fanout == {"reflection": "ok", "procedural": "ok", "identity": "ok"}
    assert "a1B2c3D4" not in json.dumps(store.audit_log())


async def test_request_uses_reflection_purpose_and_the_transcript(reflecting, chat):
    runtime, _ = reflecting()
    await chat(runtime, "Tell me about the deploy.")
    request = runtime.model().requests[-1]
    assert request.purpose == "reflection"
    assert "Tell me about the deploy." in request.messages[-1].content and "peer 'ann'" in request.messages[-1].content


async def test_invalid_output_gets_one_repair(reflecting, chat, good, tmp_path):
    runtime, fakes = reflecting(["this is not json", json.dumps(good)])
    await chat(runtime, "hello")
    purposes = [r.purpose for r in runtime.model().requests if r.purpose != "turn"]
    assert purposes == ["reflection", "reflection-repair"]
    assert "not valid JSON" in runtime.model().requests[-1].messages[-1].content
    assert "Ann deploys to staging every Friday." in memory(tmp_path)
    assert state(runtime).store.runs()[0]["status"] == "ok"


HOSTILE = {
    "wrong json": "{'memory_notes': ['x'],",
    "huge fields": json.dumps({"memory_notes": ["A" * 50_000], "what_worked": ["x"] * 500}),
    "slug with ../": json.dumps(
        {
            "skill": {"name": "../../.ssh/authorized_keys", "description": "d", "body": "ssh-rsa AAAA"},
            "memory_notes": ["harmless"],
        }
    ),
    "a list": json.dumps(["memory_notes"]),
    "wrong types": json.dumps({"memory_notes": {"0": "x"}, "user_model_updates": ["ann"], "next_check_at": 12}),
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_output_writes_nothing_and_logs_one_clear_line(name, reflecting, chat, tmp_path, caplog):
    runtime, fakes = reflecting([HOSTILE[name], HOSTILE[name]])
    with caplog.at_level(logging.WARNING, logger="thoth_reflection"):
        session = await chat(runtime, "hi")
    assert memory(tmp_path) == ""
    assert fakes["procedural"].drafts == {} and fakes["identity"].updates == []
    assert await runtime.approvals(actor="lead") == []
    assert not list(tmp_path.rglob("authorized_keys"))
    [line] = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert f"session {session.id} failed: invalid output after one repair" in line and "nothing written" in line
    store = state(runtime).store
    assert store.runs(session.id)[0]["status"] == "failed"
    failed = store.audit_log(event="run_failed")[0]["payload"]
    assert len(failed["problems"]) == 2
    assert [
        r.id.split("/")[0]
        for r in __import__("thoth_reflection.reflect", fromlist=["records"]).records(state(runtime)).all()
    ] == ["validation"]


def secrets_note() -> tuple[str, list[str]]:
    """A note stuffed with generated, real-format fake secrets, and the secret parts."""
    import random
    import string

    rng = random.Random(7)
    r = lambda n: "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(n))  # noqa: E731
    parts = [
        "sk-ant-api03-" + r(90),
        "xoxb-" + r(10) + "-" + r(24),
        "ghp_" + r(36),
        "AKIA" + r(16).upper(),
        "eyJ" + r(20) + ".eyJ" + r(30) + "." + r(40),
    ]
    password = r(16)
    text = f"Keys: {parts[0]} {parts[1]} {parts[2]} {parts[3]} jwt {parts[4]} db postgres://u:{password}@db/app"
    return text, parts + [password]


async def test_a_note_full_of_secrets_is_written_redacted(reflecting, chat, good, tmp_path):
    note, secrets = secrets_note()
    good["memory_notes"] = [note]
    good["persona_observations"] = [f"Remember {secrets[2]}"]
    tiers_but_authority = ["self-fact", "general", "other-peer", "tool", "instruction"]  # a "Keys: ..." note is `tool`
    policy = {"plugins": {"reflection": {"auto_apply": tiers_but_authority}}}
    runtime, fakes = reflecting([json.dumps(good)], config=policy)
    await chat(runtime, "hi")
    written = memory(tmp_path)
    assert "Keys: [REDACTED:anthropic-key]" in written
    everything = (
        written + json.dumps(state(runtime).store.audit_log()) + json.dumps(await runtime.approvals(actor="lead"))
    )
    everything += "".join(p.read_text() for p in (Path(runtime.home) / "reflection").rglob("*.md"))
    for secret in secrets:
        assert secret not in everything


async def test_trivial_session_is_skipped_without_a_model_call(reflecting):
    runtime, _ = reflecting()
    session = await runtime.session(peer="ann", thread="t")
    await runtime.end_session(session, "exit")
    await runtime.drain()
    assert runtime.model().requests == [] and state(runtime).store.runs() == []


async def test_no_model_configured_is_logged_and_recorded(thoth_home, caplog):
    runtime = Runtime(Config(data={}), autoload=False, home=thoth_home)
    runtime.register(reflection, name="reflection")
    session = Session(
        "default",
        "ann",
        "t",
        runtime=runtime,
        transcript=[{"type": "turn", "turn_id": "1", "user": "hi", "assistant": "yo"}],
    )
    with caplog.at_level(logging.WARNING, logger="thoth_reflection"):
        await runtime.end_session(session, "idle")
        await runtime.drain()
    assert any("no model is configured" in r.getMessage() and session.id in r.getMessage() for r in caplog.records)
    assert state(runtime).store.audit_log(event="run_skipped")[0]["session_id"] == session.id
    await runtime.aclose()


class Exploding:
    name = "exploding"

    async def stream(self, request):
        raise ConnectionError("provider unreachable")
        yield ""  # pragma: no cover


class CheapProvider:
    """Registers a `cheap` provider (a replay model with its own script) and keeps what it built."""

    def __init__(self, reply):
        self.reply, self.built = reply, []

    @hookimpl
    def register_models(self, register):
        def factory(runtime, options):
            model = Exploding() if options.get("explode") else ReplayModel([{"reply": self.reply}])
            self.built.append((model, options))
            return model

        register("cheap", factory)


async def test_a_cheaper_provider_can_be_configured(reflecting, chat, good):
    cheap = CheapProvider(json.dumps(good))
    config = {
        "models": {"cheap": {"model": "small"}},
        "plugins": {"reflection": {"model": "cheap", "model_options": {"effort": "low"}}},
    }
    runtime, fakes = reflecting(["not used"], config=config, extra={"cheap-provider": cheap})
    await chat(runtime, "hi")
    [(model, options)] = cheap.built
    assert options == {"model": "small", "effort": "low"}
    assert [r.purpose for r in model.requests] == ["reflection"]
    assert all(r.purpose == "turn" for r in runtime.model().requests)
    assert fakes["identity"].updates


async def test_a_failing_model_is_recorded_as_a_failed_run(reflecting, chat, caplog):
    config = {"models": {"cheap": {"explode": True}}, "plugins": {"reflection": {"model": "cheap"}}}
    runtime, fakes = reflecting(config=config, extra={"cheap-provider": CheapProvider("")})
    with caplog.at_level(logging.ERROR, logger="thoth_reflection"):
        session = await chat(runtime, "hi")
    assert any("ConnectionError: provider unreachable" in r.getMessage() for r in caplog.records)
    assert state(runtime).store.runs(session.id)[0]["status"] == "failed" and fakes["identity"].updates == []


@pytest.mark.parametrize(
    ("value", "shown"),
    [("lots", "'lots'"), (float("nan"), "nan"), (float("inf"), "inf"), (0, "0"), (10**9, "1000000000")],
)
async def test_bad_settings_name_the_key(make_runtime, value, shown):
    expected = rf"plugins.reflection.snapshot_tokens: expected a positive integer up to 10,000,000, got {shown}$"
    with pytest.raises(ConfigError, match=expected):
        state(make_runtime(config={"plugins": {"reflection": {"snapshot_tokens": value}}}))


async def test_core_per_plugin_keys_are_accepted(make_runtime):
    runtime = make_runtime(config={"plugins": {"reflection": {"deadline": 3, "background_deadline": 60}}})
    assert state(runtime).settings.snapshot_tokens == 600
    assert runtime.background_deadline("reflection") == 60


async def test_reflection_disabled_switch(monkeypatch):
    monkeypatch.setenv("REFLECTION_DISABLED", "true")
    pm = make_plugin_manager(Config())
    assert pm.is_blocked("reflection") and not pm.has_plugin("reflection")
    monkeypatch.delenv("REFLECTION_DISABLED")
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "reflection")
    assert make_plugin_manager(Config()).has_plugin("reflection")


async def test_conformance_kit(make_runtime):
    runtime = make_runtime({"reflection": reflection})
    await check_layer_plugin(runtime, "reflection")


async def test_conformance_kit_with_the_working_layer_showing_the_notes(make_runtime, good, tmp_path):
    working = pytest.importorskip("thoth_working.plugin")
    secret = "codeword-quartz-7731"
    result = dict(good, memory_notes=[f"The user's codeword is {secret}."], user_model_updates={})
    rules = [{"purpose": "reflection", "reply": json.dumps(result)}, {"reply": "Noted."}]
    runtime = make_runtime({"working": working, "reflection": reflection}, replies=rules, root=tmp_path)
    await check_layer_plugin(runtime, "reflection", expect_recall=True, secret=secret)
