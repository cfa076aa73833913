"""Claude Code transcripts read as finished turns: prompts, tool rounds, split messages, unfinished turns."""

from __future__ import annotations

import json

from thoth_claude_code.testing import Transcript
from thoth_claude_code.transcript import read_turns


def test_a_turn_is_the_prompt_and_the_text_after_the_last_tool_result(tmp_path):
    log = Transcript(tmp_path / "s.jsonl", "s")
    first = log.turn(
        "What does deploy.sh do?", "It copies the site.", tool=("Read", {"file_path": "deploy.sh"}, "cp -r")
    )
    second = log.turn("And the port?", "Port 6543.")
    turns = read_turns(log.path)
    assert [(t.uuid, t.prompt, t.reply) for t in turns] == [
        (first, "What does deploy.sh do?", "It copies the site."),
        (second, "And the port?", "Port 6543."),
    ]
    assert turns[0].turn_id == f"cc-{first}" and turns[0].model == "claude-sonnet-4-6"
    assert turns[0].at is not None


def test_text_before_a_tool_call_is_not_the_reply_and_a_turn_ending_in_a_tool_call_is_not_finished(tmp_path):
    log = Transcript(tmp_path / "s.jsonl", "s")
    log.prompt("Fix the tests")
    log.assistant({"type": "text", "text": "I'll run them first."}, stop_reason=None)
    log.tool_round("Bash", {"command": "pytest"}, "1 failed")
    assert read_turns(log.path) == []  # still working: the last line is a tool's answer
    log.assistant({"type": "tool_use", "id": "toolu_x", "name": "Edit", "input": {}}, stop_reason="tool_use")
    assert read_turns(log.path) == []
    log._line("user", {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "ok"}]})
    log.reply("Fixed: the fixture was stale.")
    [turn] = read_turns(log.path)
    assert (turn.prompt, turn.reply) == ("Fix the tests", "Fixed: the fixture was stale.")


def test_a_prompt_with_list_content_counts_and_meta_sidechain_and_broken_lines_do_not(tmp_path):
    log = Transcript(tmp_path / "s.jsonl", "s")
    log._line("user", {"role": "user", "content": "<command-name>/clear</command-name>"})
    log._line("user", {"role": "user", "content": "Caveat: local commands"}, isMeta=True)
    log._line("user", {"role": "user", "content": [{"type": "text", "text": "Summarise the README"}]})
    log._line("user", {"role": "user", "content": "subagent task"}, isSidechain=True)
    with log.path.open("a") as out:
        out.write('{"type": "assistant", "message": {"content": [{"type": "te')  # a line being written
        out.write("\n" + json.dumps({"type": "summary", "summary": "x"}) + "\n")
    log.reply("It describes Thoth.")
    [turn] = read_turns(log.path)
    assert (turn.prompt, turn.reply) == ("Summarise the README", "It describes Thoth.")
