"""The `openai` provider through the real SDK against the fake Chat Completions API on 127.0.0.1."""

from __future__ import annotations

import dataclasses
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from thoth_core import (
    ConfigError,
    ContextBlock,
    ModelError,
    ModelNotConfigured,
    ModelRequest,
    ToolLimit,
    complete,
    hookimpl,
)
from thoth_core.answers import InvalidAnswer, ask_for
from thoth_core.doctor import diagnose
from thoth_core.types import Message


class Persona:
    """One stable block, so requests carry a system message."""

    @hookimpl
    def pre_spawn_context(self, turn):
        return [ContextBlock(tag="persona", text="You are Thoth.", stable=True)]


@pytest.fixture(autouse=True)
def _no_openai_environment(monkeypatch):
    for name in list(os.environ):
        if name.startswith("OPENAI_"):
            monkeypatch.delenv(name)


@pytest.fixture
def local(make_runtime, fake_openai):
    """Factory: a runtime whose model is `openai` at the fake, as a local server (no key), with extra options."""

    def factory(plugins=None, **options):
        table = {"base_url": fake_openai.url, "model": "llama3.2", "timeout": 5, "max_retries": 2, **options}
        table = {k: v for k, v in table.items() if v is not None}
        return make_runtime(
            plugins or {"persona": Persona()}, config={"thoth": {"model": "openai"}, "models": {"openai": table}}
        )

    return factory


async def turn(runtime, text="hello"):
    deltas: list[str] = []
    result = await runtime.turn(text, peer="ann", thread="t", on_delta=deltas.append)
    return result, deltas


def closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


async def test_a_turn_streams_text_deltas_then_usage(local, fake_openai):
    fake_openai.replies = [{"match": "weather", "reply": "It is sunny in Cairo today."}, "fallback"]
    runtime = local()
    result, deltas = await turn(runtime, "How is the weather?")
    await runtime.aclose()
    assert len(deltas) > 1 and "".join(deltas) == "It is sunny in Cairo today."
    assert (result.reply.text, result.reply.model) == ("It is sunny in Cairo today.", "openai")
    [request] = fake_openai.completions
    body = request.body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "llama3.2" and body["max_tokens"] == 1024 and "max_completion_tokens" not in body
    assert body["messages"][0]["role"] == "system" and "You are Thoth." in body["messages"][0]["content"]
    assert body["messages"][-1] == {"role": "user", "content": "How is the weather?"}
    assert request.api_key == "no-key-needed"  # a local server without a configured key
    assert result.reply.usage.input_tokens > 0 and result.reply.usage.output_tokens > 0


async def test_tools_are_converted_and_handlers_answer_tool_calls(local, fake_openai):
    fake_openai.replies = [
        {
            "match": "deploy",
            "reply": "Let me check.",
            "tool_call": {"name": "load_skill", "arguments": {"slug": "deploy"}},
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
    runtime = local()
    request = ModelRequest(
        system=[], messages=[Message("user", "How do I deploy?")], tools=[dict(schema, handler=load_skill)]
    )
    reply = await complete(runtime.model(), request)
    await runtime.aclose()
    assert calls == [{"slug": "deploy"}]
    assert reply.text == "Let me check.\n\nThe skill says: run make deploy."
    first, second = fake_openai.completions
    assert first.body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "load_skill",
                "parameters": schema["input_schema"],
                "description": schema["description"],
            },
        }
    ]
    assistant, tool = second.body["messages"][1:]
    [call] = assistant["tool_calls"]
    assert call["function"] == {"name": "load_skill", "arguments": '{"slug": "deploy"}'}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "content": "Run make deploy, then check the dashboard."}


async def test_tool_rounds_are_bounded_and_calls_without_handlers_end_the_reply(local, fake_openai):
    fake_openai.replies = [
        {"match": "more", "reply": "Done.", "tool_call": {"name": "loop", "arguments": "{}"}},
        {"reply": "Again.", "tool_call": {"name": "loop", "arguments": "{}"}},
    ]
    runtime = local(max_tool_rounds=2)
    ran = []
    looping = {"name": "loop", "input_schema": {"type": "object"}, "handler": lambda i: ran.append(i) or "more"}
    reply = await complete(runtime.model(), ModelRequest(system=[], messages=[Message("user", "go")], tools=[looping]))
    assert [r.body.get("tool_choice") for r in fake_openai.completions] == [None, None, "none"]
    assert len(ran) == 2 and reply.text == "Again.\n\nDone.\n\nDone."
    fake_openai.requests.clear()
    free = {"name": "loop", "input_schema": {"type": "object"}}
    await complete(runtime.model(), ModelRequest(system=[], messages=[Message("user", "go")], tools=[free]))
    await runtime.aclose()
    assert len(fake_openai.completions) == 1


async def test_a_tool_past_the_turn_limits_is_an_error_and_the_model_answers_without_tools(local, fake_openai):
    fake_openai.replies = [
        {"match": "not run", "reply": "From what I know: use make deploy."},
        {"reply": "Checking.", "tool_call": {"name": "search", "arguments": {"q": "deploy"}}},
    ]

    def search(_input):
        raise ToolLimit("not run: the turn's 6 tool calls are used up; answer with what you have")

    runtime = local()
    tools = [{"name": "search", "input_schema": {"type": "object"}, "handler": search}]
    reply = await complete(runtime.model(), ModelRequest(system=[], messages=[Message("user", "deploy?")], tools=tools))
    await runtime.aclose()
    first, second = fake_openai.completions
    result = second.body["messages"][-1]
    assert result["role"] == "tool" and result["content"].startswith("not run: the turn's 6 tool calls")
    assert "tool_choice" not in first.body and second.body["tool_choice"] == "none"
    assert reply.text == "Checking.\n\nFrom what I know: use make deploy."


async def test_a_tool_of_another_api_type_is_not_sent(local, fake_openai):
    fake_openai.replies = ["No tools here."]
    runtime = local()
    tools = [
        {"type": "memory_20250818", "name": "memory", "handler": lambda _: "notes"},
        {"name": "search", "input_schema": {"type": "object"}, "handler": lambda _: "found"},
    ]
    request = ModelRequest(system=[], messages=[Message("user", "notes?")], tools=tools)
    reply = await complete(runtime.model(), request)
    await complete(runtime.model(), dataclasses.replace(request, tools=tools[:1]))
    await runtime.aclose()
    with_search, memory_only = fake_openai.completions
    assert [t["function"]["name"] for t in with_search.body["tools"]] == ["search"]
    assert "tools" not in memory_only.body and "tool_choice" not in memory_only.body
    assert reply.text == "No tools here."


async def test_a_slow_server_times_out_per_the_configured_timeout(local, fake_openai):
    fake_openai.slow = 5
    runtime = local(timeout=0.3, max_retries=0)
    with pytest.raises(
        ModelError,
        match=r"^openai: no answer from models.openai.base_url http://127.0.0.1:\d+/v1/ within 0.3s; "
        r"raise \[models.openai\] timeout$",
    ):
        await turn(runtime)
    await runtime.aclose()


async def test_a_passing_server_error_is_retried_and_the_turn_succeeds(local, fake_openai):
    fake_openai.fail_with(500, times=1)
    fake_openai.replies = ["Made it."]
    runtime = local(max_retries=1)
    result, _ = await turn(runtime)
    await runtime.aclose()
    assert result.reply.text == "Made it." and len(fake_openai.completions) == 2


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, r"^openai: API error \(500\) after 2 retries from models.openai.base_url .*: The server had an error"),
        (429, r"^openai: rate limited \(429\) after 2 retries: Rate limit reached for requests; try again shortly$"),
    ],
)
async def test_retryable_errors_are_retried_a_bounded_number_of_times(local, fake_openai, status, expected):
    fake_openai.fail_with(status)
    runtime = local(max_retries=2)
    with pytest.raises(ModelError, match=expected):
        await turn(runtime)
    await runtime.aclose()
    assert len(fake_openai.completions) == 3


async def test_a_rejected_key_is_one_clear_line_and_not_retried(local, fake_openai, monkeypatch):
    fake_openai.api_key = "the-right-key"
    monkeypatch.setenv("TEAM_KEY", "sk-wrong-key")
    runtime = local(api_key={"$env": "TEAM_KEY"})
    with pytest.raises(ModelError) as info:
        await turn(runtime)
    await runtime.aclose()
    message = str(info.value)
    assert message.startswith("openai: authentication failed (401: Incorrect API key provided: sk-wro***.) at ")
    assert message.endswith("; check OPENAI_API_KEY or [models.openai] api_key") and "\n" not in message
    assert len(fake_openai.completions) == 1 and fake_openai.completions[0].api_key == "sk-wrong-key"


async def test_connection_refused_names_the_variable_and_url(local, monkeypatch):
    url = closed_url()
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    runtime = local(base_url=None, max_retries=0)
    with pytest.raises(ModelError, match=rf"^openai: cannot reach OPENAI_BASE_URL {url}/: "):
        await turn(runtime)
    await runtime.aclose()


async def test_key_and_url_come_from_the_environment_as_the_sdk_reads_them(make_runtime, fake_openai, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("OPENAI_API_KEY", "env-key")
    runtime = make_runtime({}, config={"thoth": {"model": "openai"}})
    await turn(runtime)
    await runtime.aclose()
    assert fake_openai.completions[0].api_key == "env-key"
    assert fake_openai.completions[0].body["model"] == "gpt-4.1-mini"


async def test_the_public_api_needs_a_key_and_gets_max_completion_tokens(make_runtime, monkeypatch):
    runtime = make_runtime({}, config={"thoth": {"model": "openai"}})
    no_key = r"^openai: no API key; set OPENAI_API_KEY or \[models.openai\] api_key = "
    with pytest.raises(ModelNotConfigured, match=no_key):
        runtime.model()
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    runtime = make_runtime({}, config={"thoth": {"model": "openai"}})
    params = runtime.model().params(ModelRequest(system=[], messages=[Message("user", "hi")], max_tokens=50))
    await runtime.aclose()
    assert params["max_completion_tokens"] == 50 and "max_tokens" not in params


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"timeout": "soon"}, r"models.openai.timeout: expected a non-negative number up to 86,400, got 'soon'"),
        ({"max_retries": 1.5}, r"models.openai.max_retries: expected a non-negative integer up to 100, got 1.5"),
        ({"timeout": float("nan")}, r"models.openai.timeout: expected a non-negative number up to 86,400, got nan"),
        ({"max_tokens": 0.5}, r"models.openai.max_tokens: expected a non-negative integer up to 10,000,000, got 0.5"),
        ({"base_url": "127.0.0.1:11434"}, r"models.openai.base_url: expected an http\(s\) URL, got '127.0.0.1:11434'"),
        ({"model": ""}, r"models.openai.model: expected a model id, got ''"),
    ],
)
async def test_bad_options_name_the_key(local, options, error):
    with pytest.raises(ConfigError, match=error):
        local(**options).model()


async def test_doctor_reports_the_model_reachable_or_not(local, fake_openai):
    fake_openai.models = ["llama3.2", "qwen3"]
    lines: list[str] = []
    runtime = local()
    await diagnose(runtime, echo=lines.append)
    await runtime.aclose()
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith(f"ok  model: openai llama3.2 reachable at {fake_openai.url}/ (")
    assert fake_openai.requests[-1].method == "GET" and fake_openai.requests[-1].path == "/v1/models"

    fake_openai.fail_with(500)
    lines.clear()
    runtime = local()
    await diagnose(runtime, echo=lines.append)
    await runtime.aclose()
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith("BAD model: openai: API error (500) from models.openai.base_url")
    assert len([r for r in fake_openai.requests if r.path == "/v1/models"]) == 2, "doctor does not retry"

    lines.clear()
    runtime = local(base_url=closed_url())
    await diagnose(runtime, echo=lines.append)
    await runtime.aclose()
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith("BAD model: openai: cannot reach models.openai.base_url")


class Verdict(BaseModel):
    """Whether the deploy may go ahead."""

    go: bool
    reasons: list[str] = Field(max_length=3)


async def test_a_structured_answer_sends_its_schema_as_response_format(local, fake_openai):
    fake_openai.replies = [{"reply": '{"go": true, "reasons": ["tests pass"]}'}]
    runtime = local()
    request = ModelRequest(system=[], messages=[Message("user", "May I deploy?")], purpose="verdict")
    answer = await ask_for(runtime.model(), request, Verdict)
    assert answer == Verdict(go=True, reasons=["tests pass"])
    [sent] = fake_openai.completions
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "verdict",
            "description": "Whether the deploy may go ahead.",
            "schema": Verdict.model_json_schema(),
            "strict": False,
        },
    }

    fake_openai.replies = [{"reply": '{"go": "maybe", "reasons": ["a", "b", "c", "d"]}'}]
    with pytest.raises(InvalidAnswer) as info:
        await ask_for(runtime.model(), request, Verdict)
    await runtime.aclose()
    assert info.value.problems == ["go: expected true or false, got str", "reasons: 4 items, at most 3"]
    repair = fake_openai.completions[-1].body["messages"]
    assert repair[-1]["content"].startswith("Your reply does not fit the verdict schema: go: expected true or false")
    assert "response_format" in fake_openai.completions[-1].body


# --- `thoth ask` as a real process ---------------------------------------------------------


def spawn(*args: str, cwd: Path, env: dict[str, str | None]) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("thoth")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]
    environ = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    return subprocess.Popen([*command, *args], cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def read_until(chunks: queue.Queue[bytes], end: bytes, so_far: bytes = b"") -> bytes:
    while end not in so_far:
        chunk = chunks.get(timeout=30)
        if not chunk:
            break
        so_far += chunk
    return so_far


def test_thoth_ask_streams_a_reply_from_an_openai_compatible_server(fake_openai, tmp_path):
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "openai"\n[models.openai]\nbase_url = "{fake_openai.url}"\nmodel = "qwen3:8b"\n'
        "timeout = 10\nmax_retries = 0\n"
    )
    gate = threading.Event()
    fake_openai.replies = [{"match": "weather", "reply": "It is sunny in Cairo today.", "pause": gate}]
    env = {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "openai", "THOTH_CONFIG": None}
    env |= {name: None for name in os.environ if name.startswith(("OPENAI_", "ANTHROPIC_"))}
    process = spawn("ask", "How is the weather?", "--peer", "ann", "--thread", "t1", cwd=tmp_path, env=env)
    chunks: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        while chunk := os.read(process.stdout.fileno(), 1024):
            chunks.put(chunk)
        chunks.put(b"")

    threading.Thread(target=pump, daemon=True).start()
    try:
        first = read_until(chunks, b" ")
        assert first == b"It ", "the first delta reaches stdout while the rest of the reply is held back"
        gate.set()
        assert read_until(chunks, b"\n", first).decode() == "It is sunny in Cairo today.\n"
        assert process.wait(timeout=30) == 0, process.stderr.read().decode()
    finally:
        gate.set()
        process.kill()
    [request] = fake_openai.completions
    assert request.body["model"] == "qwen3:8b" and request.body["stream"] is True


def test_thoth_ask_with_a_rejected_key_fails_with_one_line(fake_openai, tmp_path):
    from thoth_core.testing import run_thoth

    fake_openai.api_key = "right"
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "openai"\n[models.openai]\nbase_url = "{fake_openai.url}"\n'
        'api_key = { "$env" = "MY_OPENAI_KEY" }\n'
    )
    env = {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "openai", "THOTH_CONFIG": None}
    env["MY_OPENAI_KEY"] = "wrong"
    result = run_thoth("ask", "hi", cwd=tmp_path, env=env)
    assert result.returncode == 2 and result.stdout.strip() == ""
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("thoth: error: openai: authentication failed (401: Incorrect API key provided: wrong***.)")


async def test_an_empty_base_url_variable_is_named_not_called(make_runtime, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "")  # the SDK would take "" as the URL
    runtime = make_runtime({}, config={"thoth": {"model": "openai"}})
    with pytest.raises(ModelNotConfigured, match=r"^openai: OPENAI_BASE_URL is set but empty; unset it"):
        runtime.model()
