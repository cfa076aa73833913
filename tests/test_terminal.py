"""Terminal frontends show no escape sequence or control character: `thoth_core.terminal`, `thoth ask`, the REPL."""

from __future__ import annotations

import json
import unicodedata
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from thoth_core.terminal import Printable, printable
from thoth_core.testing import run_thoth

KEPT = {"\n", "\t"}

# pieces of real sequences, so that generated text holds whole, partial and nested ones
FRAGMENTS = st.sampled_from(
    ["\x1b", "\x1b[", "\x1b]", "\x1bP", "\x1b_", "\x1b\\", "\x9b", "\x9d", "\x9c", "\x07", "\r", "\r\n", "\n", "\t"]
    + ["0;pwned", "2J", "31m", "?25l", "52;c;aGk=", "(B", "\x00", "\x7f", "\x85", "\ud800", "\udcff", "é", "漢"]
)
TEXT = st.lists(st.text() | FRAGMENTS, max_size=30).map("".join)


def unsafe(text: str) -> list[str]:
    """The characters a terminal could act on: controls (C0, DEL, C1) but newline and tab, and lone surrogates."""
    return [c for c in text if c not in KEPT and unicodedata.category(c) in ("Cc", "Cs")]


@given(TEXT)
def test_printable_text_holds_no_control_character_but_newline_and_tab(text: str) -> None:
    shown = printable(text)
    assert unsafe(shown) == []
    assert printable(shown) == shown  # nothing left to take out


@given(st.text().filter(lambda t: not unsafe(t) and "\r" not in t))
def test_text_without_controls_is_shown_as_it_is(text: str) -> None:
    assert printable(text) == text


@given(TEXT, st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_text_in_pieces_holds_no_control_character_either(text: str, cuts: list[int]) -> None:
    stream, shown, start = Printable(), [], 0
    for cut in sorted(min(c, len(text)) for c in cuts):
        shown.append(stream.feed(text[start:cut]))
        start = cut
    shown += [stream.feed(text[start:]), stream.end()]
    assert unsafe("".join(shown)) == []


def test_sequences_are_removed_whole_and_newlines_and_tabs_stay() -> None:
    text = "a \x1b]0;pwned\x07b \x1b]52;c;aGk=\x1b\\c \x1b[2J\x1b[31md\x9b1m\te\r\nf \x1b(Bg\x1bch\x00i\x85j"
    assert printable(text) == "a b c d\te\nf ghij"
    assert printable("title \x1b]0;never ended\nnext line") == "title \nnext line"  # an open OSC ends at the line


def test_a_sequence_cut_between_streamed_pieces_is_removed_whole() -> None:
    stream = Printable()
    pieces = ["a \x1b", "]0;pwn", "ed title", "\x07 b \x1b[3", "1m c\r", "\nd"]
    assert "".join(stream.feed(p) for p in pieces) + stream.end() == "a  b  c\nd"


def replay_home(tmp_path: Path, reply: str) -> dict[str, str]:
    """A home whose replay model answers `reply` to anything; only the essential layers load (fast)."""
    rules = f"[{{ reply = {json.dumps(reply)} }}]"  # a JSON string is a TOML basic string
    (tmp_path / "thoth.toml").write_text(f'[thoth]\nmodel = "replay"\n\n[models.replay]\nrules = {rules}\n')
    return {"THOTH_HOME": str(tmp_path / "data"), "THOTH_LOAD_PLUGINS": "working,procedural"}


def test_thoth_ask_shows_the_models_reply_without_its_escapes(tmp_path: Path) -> None:
    env = replay_home(tmp_path, "title \x1b]0;pwned\x07 clear \x1b[2J c1 \x9b31m end\ttab\nline2")
    done = run_thoth("ask", "esc \x1b]0;pwned\x07 x", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "title  clear  c1  end\ttab\nline2\n"
    # remembered text is shown without them too (the memory file, in the context `thoth context` prints)
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "MEMORY.md").write_text("- ann likes \x1b]0;pwned\x07 green tea\n")
    shown = run_thoth("context", "again", cwd=tmp_path, env=env)
    assert "- ann likes  green tea\n" in shown.stdout and unsafe(shown.stdout + shown.stderr) == []


def test_the_repl_shows_replies_without_escapes(tmp_path: Path) -> None:
    env = replay_home(tmp_path, "a \x1b]0;pwned\x07 b")
    done = run_thoth("chat", "--frontend", "repl", "--peer", "ann", cwd=tmp_path, env=env, input="hello\n")
    assert done.returncode == 0, done.stderr
    assert "a  b" in done.stdout and unsafe(done.stdout) == []
