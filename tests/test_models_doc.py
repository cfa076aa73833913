"""docs/models.md: its replay examples load through the real config and answer as the text says."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from thoth_core import Message, ModelRequest
from thoth_core.config import Config
from thoth_core.default_plugins import anthropic_model, claude_cli_model, replay_model

DOC = (Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()


def fenced(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC, flags=re.DOTALL)


def ask(model, text: str, purpose: str = "turn") -> str:
    return model.answer(ModelRequest(system=[], messages=[Message("user", text)], purpose=purpose))


class Runtime:
    def __init__(self, root: Path, data: dict) -> None:
        self.config = Config(data=data, path=root / "thoth.toml")


def test_the_script_file_example_answers_as_documented(tmp_path):
    [script] = fenced("json")
    (tmp_path / "replay.json").write_text(script)
    options = tomllib.loads(fenced("toml")[1])["models"]["replay"]
    model = replay_model.make_replay(Runtime(tmp_path, {}), options)
    assert model.delay == 0.05 and len(model.rules) == len(json.loads(script))
    assert ask(model, "hello there") == "Hi! What are we working on today?"
    assert ask(model, "hello", purpose="reflection") == "Hi! What are we working on today?"  # no purpose: any
    assert ask(model, "Can we DEPLOY today?").startswith("Check the board first")
    assert ask(model, "anything else") == "Noted."
    assert ask(model, "summarise the session", purpose="reflection") == "(replay script has no reply for this message)"


def test_the_inline_rules_example_answers_as_documented(tmp_path):
    options = tomllib.loads(fenced("toml")[2])["models"]["replay"]
    model = replay_model.make_replay(Runtime(tmp_path, {}), options)
    assert ask(model, "deploy now?") == "Check the board first." and ask(model, "x") == "Noted."


@pytest.mark.parametrize(
    ("module", "defaults"),
    [
        (
            anthropic_model,
            {"model": '"claude-sonnet-4-6"', "timeout": "60", "max_retries": "2", "max_tool_rounds": "4"},
        ),
        (claude_cli_model, {"command": '"claude"', "timeout": "300", "output_format": '"stream-json"'}),
    ],
)
def test_documented_defaults_are_the_modules(module, defaults):
    [table] = module.CONFIG_DEFAULTS.values()
    for key, shown in defaults.items():
        assert f"| `{key}` | `{shown}` |" in DOC
        assert json.loads(shown) == table[key]
