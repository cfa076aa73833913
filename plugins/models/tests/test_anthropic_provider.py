"""The `anthropic` provider through the real SDK against the fake Messages API on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys

import pytest
from thoth_models.anthropic_model import PRICES, cost_of, price_of

from thoth_core import (
    ConfigError,
    ContextBlock,
    ModelError,
    ModelNotConfigured,
    ModelRequest,
    ToolLimit,
    Usage,
    complete,
    hookimpl,
)
from thoth_core.doctor import diagnose
from thoth_core.types import Message


class Layers:
    """Two stable blocks (persona, skills) and one that changes every turn."""

    @hookimpl
    def pre_spawn_context(self, turn):
        return [
            ContextBlock(tag="persona", text="You are Thoth.", layer="reflection", stable=True, priority=90),
            ContextBlock(
                tag="skills", text="Skill index: deploy, triage.", layer="procedural", stable=True, priority=80
            ),
            ContextBlock(
                tag="related-episodes", text=f"Earlier {turn.peer} asked about {turn.text}.", layer="episodic"
            ),
        ]


@pytest.fixture
def claude(make_runtime, fake_anthropic):
    """Factory: a runtime whose model is `anthropic` at the fake, with extra options."""
    made = []

    def factory(plugins=None, **options):
        table = {"base_url": fake_anthropic.url, "api_key": "test-key", "timeout": 5, "max_retries": 2, **options}
        runtime = make_runtime(
            plugins or {"layers": Layers()}, config={"thoth": {"model": "anthropic"}, "models": {"anthropic": table}}
        )
        made.append(runtime)
        return runtime

    yield factory


async def turn(runtime, text="hello", peer="ann"):
    deltas: list[str] = []
    result = await runtime.turn(text, peer=peer, thread="t", on_delta=deltas.append)
    return result, deltas


async def test_a_turn_streams_through_the_sdk(claude, fake_anthropic):
    fake_anthropic.replies = [{"match": "weather", "reply": "It is sunny in Cairo today."}, "fallback"]
    runtime = claude()
    result, deltas = await turn(runtime, "How is the weather?")
    await runtime.aclose()
    assert len(deltas) > 1 and "".join(deltas) == "It is sunny in Cairo today."
    assert (result.reply.text, result.reply.model) == ("It is sunny in Cairo today.", "anthropic")
    [request] = fake_anthropic.messages_requests
    assert request.api_key == "test-key" and request.body["stream"] is True
    assert request.body["model"] == "claude-sonnet-4-6" and request.body["max_tokens"] == 1024
    assert request.body["messages"] == [{"role": "user", "content": "How is the weather?"}]
    assert result.reply.usage.output_tokens > 0 and result.reply.usage.input_tokens > 0


async def test_cache_control_lands_on_the_last_stable_block(claude, fake_anthropic):
    runtime = claude()
    first, _ = await turn(runtime, "first question")
    second, _ = await turn(runtime, "second question")
    await runtime.aclose()
    system = fake_anthropic.messages_requests[0].body["system"]
    assert [b["text"].split(">")[0] for b in system] == ["<persona", "<skills", "<related-episodes"]
    assert [("cache_control" in b) for b in system] == [False, True, False]
    assert system[1]["cache_control"] == {"type": "ephemeral"}
    assert first.reply.usage.cache_write_tokens > 0 and first.reply.usage.cache_read_tokens == 0
    assert second.reply.usage.cache_read_tokens == first.reply.usage.cache_write_tokens
    assert second.reply.usage.cost_usd is not None and 0 < second.reply.usage.cost_usd < first.reply.usage.cost_usd
    assert fake_anthropic.messages_requests[1].body["messages"][:2] == [
        {"role": "user", "content": "first question"},
        {"role": "assistant", "content": first.reply.text},
    ]


async def test_no_stable_block_means_no_cache_control(claude, fake_anthropic):
    class Volatile:
        @hookimpl
        def pre_spawn_context(self):
            return ContextBlock(tag="now", text="It is late.")

    runtime = claude({"volatile": Volatile()})
    result, _ = await turn(runtime)
    await runtime.aclose()
    assert "cache_control" not in fake_anthropic.messages_requests[0].body["system"][0]
    assert result.reply.usage.cache_write_tokens == 0


async def test_authentication_failure_is_one_clear_line_and_not_retried(claude, fake_anthropic):
    fake_anthropic.api_key = "the-right-key"
    runtime = claude()
    with pytest.raises(ModelError, match=r"authentication failed \(401.*ANTHROPIC_API_KEY") as info:
        await turn(runtime)
    await runtime.aclose()
    assert "\n" not in str(info.value)
    assert len(fake_anthropic.messages_requests) == 1


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (529, r"overloaded \(529\) after 2 retries"),
        (429, r"rate limited \(429\) after 2 retries"),
        (500, r"API error \(500\) after 2 retries"),
    ],
)
async def test_retryable_errors_are_retried_a_bounded_number_of_times(claude, fake_anthropic, status, expected):
    fake_anthropic.fail_with(status)
    runtime = claude(max_retries=2)
    with pytest.raises(ModelError, match=expected):
        await turn(runtime)
    await runtime.aclose()
    assert len(fake_anthropic.messages_requests) == 3


async def test_a_passing_rate_limit_is_retried_and_the_turn_succeeds(claude, fake_anthropic):
    fake_anthropic.fail_with(429, times=1)
    fake_anthropic.replies = ["Made it."]
    runtime = claude(max_retries=1)
    result, _ = await turn(runtime)
    await runtime.aclose()
    assert result.reply.text == "Made it."
    assert len(fake_anthropic.messages_requests) == 2


async def test_an_error_event_mid_stream_becomes_a_model_error(claude, fake_anthropic):
    fake_anthropic.fail_with(529, mid_stream=True)
    fake_anthropic.replies = ["This reply will be cut off."]
    runtime = claude()
    with pytest.raises(ModelError, match=r"overloaded \(529\); try again"):
        await turn(runtime)
    await runtime.aclose()
    assert len(fake_anthropic.messages_requests) == 1
    session = await runtime.session(peer="ann", thread="t")
    assert session.transcript[-1]["type"] == "error"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_connection_refused_names_the_base_url(claude, monkeypatch):
    url = f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    runtime = claude(base_url=None, max_retries=0)
    with pytest.raises(ModelError, match=rf"cannot reach ANTHROPIC_BASE_URL {url}"):
        await turn(runtime)
    await runtime.aclose()


async def test_a_slow_api_times_out_per_the_configured_timeout(claude, fake_anthropic):
    fake_anthropic.slow = 5
    runtime = claude(timeout=0.3, max_retries=0)
    with pytest.raises(
        ModelError, match=r"no answer from models.anthropic.base_url .* within 0.3s; raise \[models.anthropic\] timeout"
    ):
        await turn(runtime)
    await runtime.aclose()


async def test_key_and_url_come_from_the_environment_or_env_references(make_runtime, fake_anthropic, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    runtime = make_runtime({}, config={"thoth": {"model": "anthropic"}})
    await turn(runtime)
    await runtime.aclose()
    monkeypatch.setenv("TEAM_KEY", "team-key")
    runtime = make_runtime(
        {}, config={"thoth": {"model": "anthropic"}, "models": {"anthropic": {"api_key": {"$env": "TEAM_KEY"}}}}
    )
    await turn(runtime)
    await runtime.aclose()
    assert [r.api_key for r in fake_anthropic.messages_requests] == ["env-key", "team-key"]


async def test_missing_key_and_bad_options_are_clear(make_runtime, monkeypatch):
    runtime = make_runtime({}, config={"thoth": {"model": "anthropic"}})
    with pytest.raises(
        ModelNotConfigured, match=r"no API key; set ANTHROPIC_API_KEY or \[models.anthropic\] api_key = "
    ):
        runtime.model()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with pytest.raises(
        ConfigError, match=r"models.anthropic.timeout: expected a non-negative number up to 86,400, got 'soon'"
    ):
        make_runtime({}, config={"thoth": {"model": "anthropic"}, "models": {"anthropic": {"timeout": "soon"}}})


async def test_tools_pass_through_and_handlers_answer_tool_calls(claude, fake_anthropic):
    fake_anthropic.replies = [
        {
            "match": "deploy",
            "reply": "Let me check.",
            "tool_use": {"name": "load_skill", "input": {"slug": "deploy"}},
            "once": True,
        },
        {"match": "Run make deploy", "reply": "The skill says: run make deploy."},
    ]
    calls = []

    def load_skill(tool_input):
        calls.append(tool_input)
        return "Run make deploy, then check the dashboard."

    schema = {
        "name": "load_skill",
        "description": "Load a skill by slug.",
        "input_schema": {"type": "object", "properties": {"slug": {"type": "string"}}},
    }
    runtime = claude()
    model = runtime.model()
    request = ModelRequest(
        system=[], messages=[Message("user", "How do I deploy?")], tools=[dict(schema, handler=load_skill)]
    )
    reply = await complete(model, request)
    assert calls == [{"slug": "deploy"}]
    assert reply.text == "Let me check.\n\nThe skill says: run make deploy."
    first, second = fake_anthropic.messages_requests
    assert first.body["tools"] == [schema] and "system" not in first.body
    assert [b["type"] for b in second.body["messages"][1]["content"]] == ["text", "tool_use"]
    assert second.body["messages"][2]["content"][0]["content"] == "Run make deploy, then check the dashboard."
    assert reply.usage.output_tokens > 0
    await runtime.aclose()


async def test_doctor_reports_the_model_reachable_or_not(claude, fake_anthropic):
    lines: list[str] = []
    runtime = claude()
    await diagnose(runtime, echo=lines.append)
    await runtime.aclose()
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith("ok ") and f"claude-sonnet-4-6 reachable at {fake_anthropic.url}" in line
    assert fake_anthropic.requests[-1].path == "/v1/messages/count_tokens"

    lines.clear()
    runtime = claude(base_url=f"http://127.0.0.1:{_closed_port()}")
    await diagnose(runtime, echo=lines.append)
    await runtime.aclose()
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith("BAD model: anthropic: cannot reach models.anthropic.base_url")


def test_prices_and_cost():
    assert price_of("claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4-5"] == (3.0, 15.0)
    assert price_of("claude-opus-4-5") == (5.0, 25.0) and price_of("claude-opus-4-1") == (15.0, 75.0)
    assert price_of("claude-opus-4-8") is None and price_of("some-other-model") is None
    assert price_of("some-other-model", {"input": 2, "output": 4}) == (2.0, 4.0)
    usage = Usage(
        input_tokens=1_000_000, output_tokens=1_000_000, cache_write_tokens=1_000_000, cache_read_tokens=1_000_000
    )
    assert cost_of(usage, (3.0, 15.0)) == pytest.approx(3 + 15 + 3.75 + 0.3)
    assert cost_of(usage, None) is None


WARM = """
import sys, threading
from thoth_core.config import Config
from thoth_core.plugins import make_plugin_manager
from thoth_core.runtime import Runtime
from thoth_models import anthropic_model
make_plugin_manager(Config(), autoload=False)
print("anthropic" in sys.modules)
Runtime(Config(), autoload=False).register(anthropic_model, name="anthropic")  # its configure hook
for thread in threading.enumerate():
    if thread.name == "thoth-import-anthropic":
        thread.join()
print("anthropic" in sys.modules)
"""


@pytest.mark.parametrize(("key", "imported"), [(None, "False"), ("k", "True")])
def test_the_sdk_is_imported_only_when_claude_is_the_model(key, imported, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")} | (
        {"ANTHROPIC_API_KEY": key} if key else {}
    )
    run = subprocess.run(
        [sys.executable, "-c", WARM], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60
    )
    assert run.stdout.split() == ["False", imported], run.stderr


async def test_the_fake_speaks_json_bearer_auth_count_tokens_and_callable_replies(fake_anthropic):
    import anthropic

    fake_anthropic.replies = lambda body: {"reply": f"echo: {body['messages'][-1]['content']}"}
    client = anthropic.AsyncAnthropic(auth_token="bearer-token", base_url=fake_anthropic.url, max_retries=0)
    message = await client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    counted = await client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hi"}])
    await client.close()
    assert (message.content[0].text, message.stop_reason) == ("echo: hi", "end_turn")
    assert counted.input_tokens > 0
    assert [r.api_key for r in fake_anthropic.requests] == ["bearer-token", "bearer-token"]
    assert fake_anthropic.requests[0].headers["authorization"] == "Bearer bearer-token"


def test_the_fake_requires_the_version_header_like_the_api(fake_anthropic):
    import json
    import urllib.error
    import urllib.request

    body = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
    request = urllib.request.Request(f"{fake_anthropic.url}/v1/messages", data=body, headers={"x-api-key": "k"})
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=5)
    assert info.value.code == 400
    assert json.loads(info.value.read())["error"]["type"] == "invalid_request_error"


async def test_tool_rounds_are_bounded_and_calls_without_handlers_end_the_reply(claude, fake_anthropic):
    fake_anthropic.replies = [
        {"match": "more", "reply": "Still looking.", "tool_use": {"name": "search", "input": {"q": "x"}}},
        {"reply": "Looking.", "tool_use": {"name": "search", "input": {"q": "x"}}},
    ]
    schema = {"name": "search", "description": "Search.", "input_schema": {"type": "object"}}
    runtime = claude(max_tool_rounds=2)
    model = runtime.model()
    ask = [Message("user", "find x")]
    ran = []
    search = dict(schema, handler=lambda tool_input: ran.append(tool_input) or "more")
    loops = await complete(model, ModelRequest(system=[], messages=ask, tools=[search]))
    bodies = [r.body for r in fake_anthropic.messages_requests]
    assert [b.get("tool_choice") for b in bodies] == [None, None, {"type": "none"}]  # the last one must answer
    assert len(ran) == 2 and loops.text == "Looking.\n\nStill looking.\n\nStill looking."
    plain = await complete(model, ModelRequest(system=[], messages=ask, tools=[schema]))
    await runtime.aclose()
    assert len(fake_anthropic.messages_requests) == 4 and plain.text == "Looking."


async def test_a_tool_past_the_turn_limits_is_an_error_and_the_model_answers_without_tools(claude, fake_anthropic):
    fake_anthropic.replies = [
        {"match": "not run", "reply": "From what I know: use make deploy."},
        {"reply": "Checking.", "tool_use": {"name": "search", "input": {"q": "deploy"}}},
    ]

    def search(_input):
        raise ToolLimit("not run: the turn's 6 tool calls are used up; answer with what you have")

    runtime = claude()
    tools = [{"name": "search", "input_schema": {"type": "object"}, "handler": search}]
    reply = await complete(runtime.model(), ModelRequest(system=[], messages=[Message("user", "deploy?")], tools=tools))
    await runtime.aclose()
    first, second = fake_anthropic.messages_requests
    [result] = second.body["messages"][-1]["content"]
    assert result["is_error"] is True and result["content"].startswith("not run: the turn's 6 tool calls")
    assert "tool_choice" not in first.body and second.body["tool_choice"] == {"type": "none"}
    assert reply.text == "Checking.\n\nFrom what I know: use make deploy."


async def test_the_memory_tool_type_passes_through_and_its_handler_answers(claude, fake_anthropic):
    fake_anthropic.replies = [
        {"match": "kept notes", "reply": "Your notes say: ship on Friday."},
        {"tool_use": {"name": "memory", "input": {"command": "view", "path": "/memories"}}},
    ]
    calls = []

    def memory(tool_input):
        calls.append(tool_input)
        return "kept notes: ship on Friday"

    runtime = claude()
    assert runtime.model().tool_types == {"custom", "memory_20250818"}
    tools = [{"type": "memory_20250818", "name": "memory", "handler": memory}]
    reply = await complete(runtime.model(), ModelRequest(system=[], messages=[Message("user", "notes?")], tools=tools))
    await runtime.aclose()
    first, second = fake_anthropic.messages_requests
    assert first.body["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert calls == [{"command": "view", "path": "/memories"}]
    assert second.body["messages"][-1]["content"][0]["content"] == "kept notes: ship on Friday"
    assert reply.text == "Your notes say: ship on Friday."


async def test_an_answer_schema_is_a_forced_tool_and_its_input_the_reply(claude, fake_anthropic):
    from pydantic import BaseModel

    from thoth_core.answers import ask_for

    class Verdict(BaseModel):
        """Whether the deploy may go ahead."""

        go: bool
        reasons: list[str] = []

    fake_anthropic.replies = ['```json\n{"go": false, "reasons": ["the board says frozen"]}\n```']
    runtime = claude()
    request = ModelRequest(system=[], messages=[Message("user", "May I deploy?")], purpose="verdict")
    reply = await complete(runtime.model(), dataclasses.replace(request, answer=Verdict))
    assert json.loads(reply.text) == {"go": False, "reasons": ["the board says frozen"]}
    [sent] = fake_anthropic.messages_requests
    assert sent.body["tool_choice"] == {"type": "tool", "name": "verdict"}
    assert sent.body["tools"] == [
        {
            "name": "verdict",
            "description": "Whether the deploy may go ahead.",
            "input_schema": Verdict.model_json_schema(),
        }
    ]
    fake_anthropic.replies = [{"reply": "Sure, go ahead!", "once": True}, '{"go": true}']  # prose: a text block
    assert await ask_for(runtime.model(), request, Verdict) == Verdict(go=True)
    await runtime.aclose()
    repair = fake_anthropic.messages_requests[-1].body
    assert repair["messages"][-2] == {"role": "assistant", "content": "Sure, go ahead!"}
    assert repair["messages"][-1]["content"].startswith(
        "Your reply does not fit the verdict schema: answer: not valid JSON"
    )


async def test_an_empty_base_url_variable_is_named_not_called(make_runtime, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "")  # the SDK would take "" as the URL: "missing an 'http://'"
    runtime = make_runtime({}, config={"thoth": {"model": "anthropic"}})
    with pytest.raises(ModelNotConfigured, match=r"^anthropic: ANTHROPIC_BASE_URL is set but empty; unset it"):
        runtime.model()
