"""Bad input is refused at start, in one line, before anything is kept or a model is called (issue 36 item 7).

Config values (the core's, every plugin's through `CONFIG_SCHEMA` or its defaults' types), peer,
thread and workspace names, and message text no store can keep: each through the real `thoth`
in a subprocess (exit 2, one line naming the file, key or value, no reply, nothing journaled), and
through the runtime that every frontend uses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thoth_core import ConfigError, Turn, hookimpl
from thoth_core.errors import InputError
from thoth_core.inputs import NAME_MAX, check_name, check_text
from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

REPLAY = '[thoth]\nmodel = "replay"\n\n[models.replay]\nrules = [{ reply = "the model answered" }]\n'
PLUGINS = "working,procedural,episodic,anthropic,openai"


def home_with(tmp_path: Path, extra: str = "") -> tuple[Path, dict[str, str | None]]:
    """A home whose replay model answers anything, plus extra TOML; its data folder is `data`."""
    (tmp_path / "thoth.toml").write_text(REPLAY + extra, encoding="utf-8")
    return tmp_path / "data", {"THOTH_HOME": str(tmp_path / "data"), "THOTH_LOAD_PLUGINS": PLUGINS}


def kept(data: Path) -> list[Path]:
    """Files that hold a turn: the journal's rows, transcripts, episodes."""
    found = [p for p in data.rglob("*") if p.is_file() and (p.suffix == ".jsonl" or "episodes" in p.name)]
    journal = data / "journal.db"
    if journal.exists():
        import sqlite3

        with sqlite3.connect(journal) as db:
            found += [journal] * db.execute("select count(*) from pending").fetchone()[0]
    return found


@pytest.mark.parametrize(
    ("toml", "line"),
    [
        (
            '\n[plugins.episodic]\nann = "bogus"\n',
            "plugins.episodic.ann: expected one of 'auto', 'exact', 'usearch', got 'bogus'",
        ),
        (
            "\n[plugins.episodic]\nthreads = 2.5\n",
            "plugins.episodic.threads: expected a non-negative integer up to 1,024, got 2.5",
        ),
        (
            "\n[plugins.episodic]\ndeadline = 1e308\n",
            "plugins.episodic.deadline: expected a positive number of seconds up to 86,400, got 1e+308",
        ),
        (
            "\n[models.anthropic]\ntimeout = -3\n",
            "models.anthropic.timeout: expected a non-negative number up to 86,400, got -3",
        ),
        ("\n[models.openai]\nbase_url = 12345\n", "models.openai.base_url: expected a string, got 12345"),
        ("\n[models.openai]\napi_key = { value = 1 }\n", "models.openai.api_key: secrets are references: api_key = "),
    ],
    ids=["episodic-ann", "episodic-threads", "plugin-deadline", "anthropic-timeout", "openai-base-url", "secret-table"],
)
def test_a_bad_plugin_value_stops_the_command_before_the_model(tmp_path: Path, toml: str, line: str) -> None:
    data, env = home_with(tmp_path, toml)
    done = run_thoth("ask", "hello", cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    [said] = done.stderr.splitlines()
    where = f"{tmp_path / 'thoth.toml'}:{REPLAY.count(chr(10)) + 3}: "
    assert said.startswith(f"thoth: error: {where}{line}"), said
    assert not data.exists()  # refused as the plugins loaded: not even the data folder


@pytest.mark.parametrize(
    ("setting", "line"),
    [
        ("deadline = 1e308", "thoth.deadline: must be at most 86,400 seconds, got 1e+308"),
        ("exit_deadline = 1e10", "thoth.exit_deadline: must be at most 86,400 seconds, got 10000000000.0"),
        ("idle_minutes = 1e9", "thoth.idle_minutes: must be at most 527,040 minutes, got 1000000000.0"),
        ('workspace = ""', "thoth.workspace: must not be empty, got ''"),
        ('workspace = "a\\u0007b"', "thoth.workspace: holds a control or invisible character (U+0007), got 'a\\x07b'"),
        ('owner = " ann"', "thoth.owner: must not start or end with a space, got ' ann'"),
        ('founders = ["ann", ""]', "thoth.founders: each founder must not be empty, got ''"),
    ],
)
def test_a_bad_core_value_stops_the_command(tmp_path: Path, setting: str, line: str) -> None:
    (tmp_path / "thoth.toml").write_text(f"[thoth]\n{setting}\n", encoding="utf-8")
    done = run_thoth("ask", "hello", cwd=tmp_path, env={"THOTH_HOME": str(tmp_path / "data"), "THOTH_LOAD_PLUGINS": ""})
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr == f"thoth: error: {tmp_path / 'thoth.toml'}:2: {line}\n"


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--peer", ""], "peer name '': must not be empty"),
        (["--peer", "a\x1b[31mb"], "peer name 'a\\x1b[31mb': holds a control or invisible character (U+001B)"),
        (["--peer", "p" * 5000], f"peer name {'p' * 40!r}...: longer than 128 characters (5,000)"),
        (["--peer", "ann "], "peer name 'ann ': must not start or end with a space"),
        (["--thread", ""], "thread name '': must not be empty"),
        (["--thread", "a\nb"], "thread name 'a\\nb': holds a control or invisible character (U+000A)"),
        (["--thread", "t\u202e"], "thread name 't\\u202e': holds a control or invisible character (U+202E)"),
        (["--workspace", ""], "workspace name '': must not be empty"),
    ],
    ids=[
        "peer-empty",
        "peer-escape",
        "peer-5000",
        "peer-space",
        "thread-empty",
        "thread-newline",
        "thread-bidi",
        "ws-empty",
    ],
)
def test_a_bad_name_is_refused_before_the_turn_is_kept(tmp_path: Path, args: list[str], line: str) -> None:
    data, env = home_with(tmp_path)
    done = run_thoth("ask", "hello", *args, cwd=tmp_path, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"thoth: error: {line}; nothing was sent or kept\n"
    assert kept(data) == []


def test_text_that_is_not_utf8_is_refused_in_ask_and_in_the_repl(tmp_path: Path) -> None:
    data, env = home_with(tmp_path)
    for message in (
        b"hi \xff\xfe there",
        b"/remember I like \xed\xa0\x80 tea",
    ):  # the second: a UTF-8-encoded surrogate
        done = run_thoth("ask", os.fsdecode(message), cwd=tmp_path, env=env)
        assert (done.returncode, done.stdout) == (2, "")
        [said] = done.stderr.splitlines()
        assert said.startswith("thoth: error: the message is not valid UTF-8 (byte 0x") and said.endswith(
            "nothing was sent or kept"
        )
    script = Path(sys.executable).with_name("thoth")
    lines = b"hi \xff there\n/remember I like \xed\xa0\x80 tea\nhello\n"
    chat = subprocess.run(
        [str(script), "chat", "--frontend", "repl", "--peer", "ann"],
        input=lines,
        capture_output=True,
        cwd=tmp_path,
        env={**os.environ, **env},
        timeout=60,
        check=False,
    )
    assert chat.returncode == 0, chat.stderr
    assert chat.stderr.decode().count("error: the message is not valid UTF-8") == 2
    assert chat.stdout.decode().count("the model answered") == 1  # the chat went on: the good line was answered
    assert b"Traceback" not in chat.stderr


# --- through the runtime every frontend uses -----------------------------------------------------


async def test_the_runtime_refuses_bad_names_and_text_before_the_model_or_the_journal(make_runtime) -> None:
    runtime = make_runtime()
    for kwargs in (
        {"peer": "", "thread": "t"},
        {"peer": "ann", "thread": "\x00"},
        {"peer": "ann", "thread": "t", "workspace": ""},
    ):
        with pytest.raises(InputError):
            await runtime.turn("hello", **kwargs)
    for text in ("hello \udcff", "a lone \ud800", "nul \x00 here", "/remember I like \ud800 tea"):
        with pytest.raises(InputError):
            await runtime.turn(text, peer="ann", thread="t")
    assert runtime.model().requests == [] and runtime.sessions == {}
    assert runtime.journal.pending() == []
    session = await runtime.session(peer="ann", thread="t")  # MCP's tools run commands without a turn
    answer = await runtime.run_command("help", "I like \ud800 tea", Turn("/help", "ann", "t", "default"), session)
    assert (
        answer.text
        == "/help: the text is not valid Unicode (a lone surrogate U+D800 at character 7); nothing was sent or kept"
    )


class Strict:
    """A plugin that declares a rule and two defaults, and checks nothing itself."""

    CONFIG_DEFAULTS = {"plugins.strict": {"mode": "fast", "limit": 3, "on": True, "tags": []}}

    @hookimpl
    def configure(self, runtime):  # noqa: ANN001, ANN201 - a test plugin
        return None


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"limit": "many"}, "plugins.strict.limit: expected a finite number, got 'many'"),
        ({"limit": float("nan")}, "plugins.strict.limit: expected a finite number, got nan"),
        ({"on": "yes"}, "plugins.strict.on: expected true or false, got 'yes'"),
        ({"mode": 7}, "plugins.strict.mode: expected a string, got 7"),
        ({"tags": "a,b"}, "plugins.strict.tags: expected a list, got 'a,b'"),
    ],
)
def test_a_plugins_value_is_held_to_its_defaults_type_when_it_declares_no_rule(make_runtime, table, message) -> None:
    with pytest.raises(ConfigError, match=f"{message}$"):
        make_runtime({"strict": Strict()}, config={"plugins": {"strict": table}})
    make_runtime({"strict": Strict()}, config={"plugins": {"strict": {"limit": 2.5, "on": False, "mode": "slow"}}})


# --- the promises, as properties -------------------------------------------------------------------


ANY_TEXT = st.lists(st.characters(exclude_categories=()) | st.sampled_from(["\ud800", "\udcff", "\x00"]), max_size=80)


@given(ANY_TEXT.map("".join))
def test_text_is_refused_exactly_when_a_store_could_not_keep_it(text: str) -> None:
    try:
        text.encode("utf-8")
        keepable = "\x00" not in text
    except UnicodeEncodeError:
        keepable = False
    if keepable:
        assert check_text(text) == text
    else:
        with pytest.raises(InputError, match="nothing was sent or kept$"):
            check_text(text)


@given(st.text(max_size=NAME_MAX + 20))
def test_an_accepted_name_is_short_printable_and_trimmed(name: str) -> None:
    try:
        check_name("peer", name)
    except InputError as exc:
        assert str(exc).startswith("peer name ") and "\n" not in str(exc)  # one line, whatever the name held
        return
    assert 0 < len(name) <= NAME_MAX and name == name.strip() and name.isprintable()


def test_chat_refuses_a_bad_peer_before_any_frontend_starts(tmp_path: Path) -> None:
    _, env = home_with(tmp_path)
    done = run_thoth("chat", "--frontend", "repl", "--peer", "", cwd=tmp_path, env=env, input="hello\n")
    assert (done.returncode, done.stdout) == (2, "")  # no banner: the REPL never started
    assert done.stderr == "thoth: error: peer name '': must not be empty; nothing was sent or kept\n"
