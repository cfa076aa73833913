"""Session-end reflection through the real SDKs, against the fake APIs on 127.0.0.1."""

from __future__ import annotations

import json

from thoth_reflection.settings import state


def openai_config(fake_openai):
    return {"thoth": {"model": "openai"}, "models": {"openai": {"base_url": fake_openai.url, "model": "qwen3:8b"}}}


def anthropic_config(fake_anthropic):
    table = {"base_url": fake_anthropic.url, "api_key": "test-key", "max_retries": 0}
    return {"thoth": {"model": "anthropic"}, "models": {"anthropic": table}}


async def test_reflection_through_an_openai_compatible_server(reflecting, chat, good, fake_openai, tmp_path):
    fake_openai.replies = [{"match": "Return the JSON object now", "reply": json.dumps(good)}, "Sure."]
    runtime, fakes = reflecting(config=openai_config(fake_openai))
    session = await chat(runtime, "How do I deploy to staging?")
    await runtime.aclose()
    [run] = state(runtime).store.runs(session.id)
    assert run["status"] == "ok"
    assert "Ann deploys to staging every Friday." in (tmp_path / "persona" / "MEMORY.md").read_text()
    assert fakes["identity"].updates == [("ann", "Prefers terse answers.")]
    assert fakes["procedural"].drafts["deploy-staging"]["session"] == session.id
    [asked] = [r.body for r in fake_openai.completions if "response_format" in r.body]
    sent = asked["response_format"]["json_schema"]
    assert sent["name"] == "reflection" and "skill" in sent["schema"]["properties"]


async def test_an_invalid_openai_answer_is_repaired_once(reflecting, chat, good, fake_openai):
    fake_openai.replies = [
        {"match": "Return the JSON object now", "reply": json.dumps(dict(good, next_check_at="tomorrow"))},
        {"match": "does not fit the reflection schema", "reply": json.dumps(good)},
        "Sure.",
    ]
    runtime, fakes = reflecting(config=openai_config(fake_openai))
    session = await chat(runtime, "hello")
    await runtime.aclose()
    assert state(runtime).store.runs(session.id)[0]["status"] == "ok"
    repair = [r.body["messages"][-1]["content"] for r in fake_openai.completions if "response_format" in r.body][-1]
    assert "next_check_at: 'tomorrow' is not an ISO-8601 time" in repair
    assert fakes["identity"].updates


async def test_reflection_through_claude_is_a_forced_tool_call(reflecting, chat, good, fake_anthropic, tmp_path):
    fake_anthropic.replies = [{"match": "Return the JSON object now", "reply": json.dumps(good)}, "Sure."]
    runtime, fakes = reflecting(config=anthropic_config(fake_anthropic))
    session = await chat(runtime, "How do I deploy to staging?")
    await runtime.aclose()
    assert state(runtime).store.runs(session.id)[0]["status"] == "ok"
    assert "Ann deploys to staging every Friday." in (tmp_path / "persona" / "MEMORY.md").read_text()
    [asked] = [r.body for r in fake_anthropic.messages_requests if "tool_choice" in r.body]
    assert asked["tool_choice"] == {"type": "tool", "name": "reflection"}
    [tool] = asked["tools"]
    assert tool["name"] == "reflection" and tool["input_schema"]["properties"]["memory_notes"]["maxItems"] == 20
