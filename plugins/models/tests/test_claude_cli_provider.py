"""The `claude-cli` provider runs a real subprocess: a small fake `claude` script on PATH."""

from __future__ import annotations

import json
import os
import sys

import pytest
from thoth_models.claude_cli_model import ClaudeCliModel, prompt_text

from thoth_core import ConfigError, ContextBlock, ModelError, ModelNotConfigured, ModelRequest, complete, hookimpl
from thoth_core.doctor import diagnose
from thoth_core.types import Message

FAKE_CLAUDE = """\
#!{python}
# A stand-in for Claude Code's `claude -p`: logs its argv and stdin, answers per FAKE_CLAUDE_MODE.
import json, os, sys, time
if sys.argv[1:] == ["--version"]:
    print("2.1.0 (Claude Code)")
    sys.exit(0)
prompt = sys.stdin.read()
with open(os.environ["FAKE_CLAUDE_LOG"], "a") as log:
    log.write(json.dumps({{"argv": sys.argv[1:], "stdin": prompt}}) + "\\n")
mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
reply = ["Hello ", "from ", "Claude ", "Code."] * int(os.environ.get("FAKE_CLAUDE_REPEAT", "1"))
def emit(event):
    print(json.dumps(event), flush=True)
if mode == "fail":
    print("Error: Invalid API key · Please run /login", file=sys.stderr)
    sys.exit(1)
if mode == "hang":
    time.sleep(30)
if "text" in sys.argv:
    for piece in reply:
        print(piece, end="", flush=True)
    sys.exit(0)
emit({{"type": "system", "subtype": "init", "session_id": "s1", "tools": []}})
if mode != "whole":
    emit({{"type": "stream_event", "event": {{"type": "message_start", "message": {{"id": "m1"}}}}}})
    for piece in reply:
        delta = {{"type": "text_delta", "text": piece}}
        emit({{"type": "stream_event", "event": {{"type": "content_block_delta", "index": 0, "delta": delta}}}})
message = {{"role": "assistant", "content": [{{"type": "text", "text": "".join(reply)}}]}}
emit({{"type": "assistant", "message": message, "session_id": "s1"}})
if mode == "is_error":
    failed = "Credit balance is too low"
    emit({{"type": "result", "subtype": "error_during_execution", "is_error": True, "result": failed}})
    sys.exit(1)
usage = {{"input_tokens": 40, "output_tokens": 5, "cache_read_input_tokens": 300, "cache_creation_input_tokens": 0}}
emit({{"type": "result", "subtype": "success", "is_error": False, "result": "".join(reply),
      "total_cost_usd": 0.0123, "usage": usage}})
"""


@pytest.fixture
def fake_claude(tmp_path, monkeypatch):
    """Put a fake `claude` on PATH; returns a function reading what it was called with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE_CLAUDE.format(python=sys.executable))
    script.chmod(0o755)
    log = tmp_path / "claude-calls.jsonl"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    return lambda: [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


class Persona:
    @hookimpl
    def pre_spawn_context(self):
        return ContextBlock(tag="persona", text="You are Thoth.", stable=True)


def cli_runtime(make_runtime, **options):
    return make_runtime(
        {"persona": Persona()}, config={"thoth": {"model": "claude-cli"}, "models": {"claude-cli": options}}
    )


async def test_a_turn_streams_stdout_deltas_with_the_context_as_system_prompt(make_runtime, fake_claude):
    runtime = cli_runtime(make_runtime, model="sonnet", effort="low")
    deltas: list[str] = []
    result = await runtime.turn("hi there", peer="ann", thread="t", on_delta=deltas.append)
    assert deltas == ["Hello ", "from ", "Claude ", "Code."]
    assert result.reply.text == "Hello from Claude Code." and result.reply.model == "claude-cli"
    usage = result.reply.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cost_usd) == (40, 5, 300, 0.0123)
    [call] = fake_claude()
    argv = call["argv"]
    assert argv[:2] == ["-p", "--output-format"] and "stream-json" in argv and "--include-partial-messages" in argv
    assert argv[argv.index("--system-prompt") + 1] == "<persona>\nYou are Thoth.\n</persona>"
    assert argv[argv.index("--model") + 1] == "sonnet" and argv[argv.index("--effort") + 1] == "low"
    assert argv[argv.index("--tools") + 1] == ""
    assert call["stdin"] == "hi there"


async def test_history_goes_on_stdin_and_append_mode_keeps_claude_codes_prompt(make_runtime, fake_claude):
    runtime = cli_runtime(make_runtime, system_prompt="append")
    await runtime.turn("first", peer="ann", thread="t")
    await runtime.turn("second", peer="ann", thread="t")
    second = fake_claude()[1]
    assert "--append-system-prompt" in second["argv"] and "--system-prompt" not in second["argv"]
    assert second["stdin"].startswith(
        "<conversation>\n<user>\nfirst\n</user>\n<assistant>\nHello from Claude Code.\n</assistant>"
    )
    assert second["stdin"].endswith("Reply to this message:\nsecond")


async def test_whole_messages_are_used_when_the_cli_sends_no_partials(make_runtime, fake_claude, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "whole")
    reply = await complete(cli_runtime(make_runtime).model(), ModelRequest(system=[], messages=[Message("user", "hi")]))
    assert reply.text == "Hello from Claude Code."
    assert "--system-prompt" not in fake_claude()[0]["argv"]


async def test_a_message_longer_than_a_pipe_buffer_line_is_read_whole(make_runtime, fake_claude, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "whole")
    monkeypatch.setenv("FAKE_CLAUDE_REPEAT", "20000")
    reply = await complete(cli_runtime(make_runtime).model(), ModelRequest(system=[], messages=[Message("user", "hi")]))
    assert reply.text == "Hello from Claude Code." * 20000


async def test_text_output_streams_raw_stdout(make_runtime, fake_claude):
    model = cli_runtime(make_runtime, output_format="text").model()
    pieces = [
        item
        async for item in model.stream(ModelRequest(system=[], messages=[Message("user", "hi")]))
        if isinstance(item, str)
    ]
    assert "".join(pieces) == "Hello from Claude Code."
    assert "--verbose" not in fake_claude()[0]["argv"]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("fail", r"claude exited with 1: Error: Invalid API key · Please run /login"),
        ("is_error", r"claude-cli: Credit balance is too low"),
    ],
)
async def test_failures_become_one_line_model_errors(make_runtime, fake_claude, monkeypatch, mode, expected):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    runtime = cli_runtime(make_runtime)
    with pytest.raises(ModelError, match=expected):
        await runtime.turn("hi", peer="ann", thread="t")


async def test_a_hanging_cli_is_killed_at_the_timeout(make_runtime, fake_claude, monkeypatch):
    monkeypatch.setenv("FAKE_CLAUDE_MODE", "hang")
    runtime = cli_runtime(make_runtime, timeout=0.5)
    with pytest.raises(ModelError, match=r"no answer within 0.5s"):
        await runtime.turn("hi", peer="ann", thread="t")


async def test_a_missing_binary_says_how_to_install_it(make_runtime, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    runtime = cli_runtime(make_runtime)
    with pytest.raises(ModelNotConfigured, match=r"command 'claude' not found on PATH; install Claude Code"):
        runtime.model()
    gone = ClaudeCliModel(str(tmp_path / "no-such-claude"))
    with pytest.raises(ModelNotConfigured, match="not found"):
        await complete(gone, ModelRequest(system=[], messages=[Message("user", "hi")]))


async def test_bad_options_name_their_key(make_runtime, fake_claude):
    with pytest.raises(
        ConfigError, match=r"models.claude-cli.output_format: expected 'stream-json' or 'text', got 'xml'"
    ):
        cli_runtime(make_runtime, output_format="xml").model()
    with pytest.raises(ConfigError, match=r"models.claude-cli.timeout"):
        cli_runtime(make_runtime, timeout=0).model()


async def test_doctor_shows_the_cli_version(make_runtime, fake_claude):
    lines: list[str] = []
    await diagnose(cli_runtime(make_runtime), echo=lines.append)
    [line] = [line for line in lines if "model:" in line]
    assert line.startswith("ok ") and "claude-cli 2.1.0 (Claude Code) at " in line


def test_prompt_text_of_a_single_message_is_the_message():
    assert prompt_text(ModelRequest(system=[], messages=[Message("user", "just this")])) == "just this"


async def test_an_answer_schema_is_appended_to_the_system_prompt(make_runtime, fake_claude):
    from pydantic import BaseModel

    from thoth_core.answers import InvalidAnswer, ask_for

    class Verdict(BaseModel):
        """Whether the deploy may go ahead."""

        go: bool

    runtime = cli_runtime(make_runtime)
    persona = ContextBlock(tag="persona", text="You are Thoth.")
    request = ModelRequest(system=[persona], messages=[Message("user", "ok?")])
    with pytest.raises(InvalidAnswer, match=r"answer: not valid JSON"):  # the fake answers prose, twice
        await ask_for(runtime.model(), request, Verdict)
    first, repair = fake_claude()
    system = first["argv"][first["argv"].index("--system-prompt") + 1]
    assert system.startswith("<persona>\nYou are Thoth.\n</persona>\n\n<answer-schema>\nAnswer with one JSON object")
    assert '"go"' in system and "Whether the deploy may go ahead." in system
    assert "Your reply does not fit the verdict schema: answer: not valid JSON" in repair["stdin"]
