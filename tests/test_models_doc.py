"""docs/models.md: its replay examples and openai recipes load through the real config and work as the text says."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from thoth_models import anthropic_model, claude_cli_model, openai_model

from thoth_core import Message, ModelRequest
from thoth_core.config import Config
from thoth_core.default_plugins import replay_model

DOC = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()


def fenced(language: str, containing: str = "") -> list[str]:
    return [block for block in re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.DOTALL) if containing in block]


def ask(model, text: str, purpose: str = "turn") -> str:
    return model.answer(ModelRequest(system=[], messages=[Message("user", text)], purpose=purpose))


class Runtime:
    def __init__(self, root: Path, data: dict) -> None:
        self.config = Config(data=data, path=root / "thoth.toml")


def test_the_script_file_example_answers_as_documented(tmp_path):
    [script] = fenced("json")
    (tmp_path / "replay.json").write_text(script)
    options = tomllib.loads(fenced("toml", "[models.replay]")[0])["models"]["replay"]
    model = replay_model.make_replay(Runtime(tmp_path, {}), options)
    assert model.delay == 0.05 and len(model.rules) == len(json.loads(script))
    assert ask(model, "hello there") == "Hi! What are we working on today?"
    assert ask(model, "hello", purpose="reflection") == "Hi! What are we working on today?"  # no purpose: any
    assert ask(model, "Can we DEPLOY today?").startswith("Check the board first")
    assert ask(model, "anything else") == "Noted."
    assert ask(model, "summarise the session", purpose="reflection") == "(replay script has no reply for this message)"


def test_the_inline_rules_example_answers_as_documented(tmp_path):
    options = tomllib.loads(fenced("toml", "[models.replay]")[1])["models"]["replay"]
    model = replay_model.make_replay(Runtime(tmp_path, {}), options)
    assert ask(model, "deploy now?") == "Check the board first." and ask(model, "x") == "Noted."


@pytest.mark.parametrize(
    ("module", "defaults"),
    [
        (
            anthropic_model,
            {"model": '"claude-sonnet-4-6"', "timeout": "60", "max_retries": "2", "max_tool_rounds": "8"},
        ),
        (
            openai_model,
            {"model": '"gpt-4.1-mini"', "timeout": "60", "max_retries": "2", "max_tool_rounds": "8"},
        ),
        (claude_cli_model, {"command": '"claude"', "timeout": "300", "output_format": '"stream-json"'}),
    ],
)
def test_documented_defaults_are_the_modules(module, defaults):
    [table] = module.CONFIG_DEFAULTS.values()
    for key, shown in defaults.items():
        assert f"| `{key}` | `{shown}` |" in DOC
        assert json.loads(shown) == table[key]


LOCAL_SERVERS = {
    "Ollama": "http://127.0.0.1:11434/v1",
    "vLLM": "http://127.0.0.1:8000/v1",
    "LM Studio": "http://127.0.0.1:1234/v1",
    "llama.cpp": "http://127.0.0.1:8080/v1",
}


@pytest.mark.parametrize("server", list(LOCAL_SERVERS))
async def test_each_local_server_recipe_answers_a_turn_without_a_key(server, make_runtime, fake_openai, monkeypatch):
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    section = DOC[DOC.index(f"**{server}**") :]
    recipe = tomllib.loads(re.search(r"```toml\n(.*?)```", section, flags=re.DOTALL).group(1))  # its first block
    assert recipe["thoth"]["model"] == "openai" and recipe["models"]["openai"]["base_url"] == LOCAL_SERVERS[server]
    runtime = make_runtime({}, config=recipe)
    assert str(runtime.model().client.base_url).rstrip("/") == LOCAL_SERVERS[server]
    await runtime.aclose()
    recipe["models"]["openai"]["base_url"] = fake_openai.url  # the same settings, at a server that answers
    fake_openai.replies = ["Hello from a local model."]
    runtime = make_runtime({}, config=recipe)
    assert (await runtime.turn("hi", peer="ann", thread="t")).reply.text == "Hello from a local model."
    await runtime.aclose()
    [request] = fake_openai.completions
    assert request.body["model"] == recipe["models"]["openai"]["model"] and request.api_key == "no-key-needed"
