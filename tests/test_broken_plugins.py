"""A broken plugin, backend or command is named in one line, through the real `thoth` in a home made by `thoth init`.

The broken plugins live in a SITE directory as a distribution described by a hand-written
`.dist-info` (as in test_third_party.py), so `thoth` finds them through their entry points;
`THOTH_LOAD_PLUGINS` picks the few each test loads. The checks of results and handlers are also
Hypothesis properties, in-process.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from thoth_core import ContextBlock, hookimpl
from thoth_core._calls import _Timed
from thoth_core.results import COMMAND_ARGUMENTS, check, command_output, handler_problem
from thoth_core.testing import run_thoth

FAKES = {
    "blocker": """
import time
from thoth_core import ContextBlock, hookimpl

@hookimpl
async def pre_spawn_context(turn):
    time.sleep(1.5)  # holds the event loop: every other async call waits behind it
    return ContextBlock("blocker", "the blocker's block")
""",
    "innocent": """
import asyncio
from thoth_core import ContextBlock, hookimpl

@hookimpl
async def pre_spawn_context(turn):
    await asyncio.sleep(0.05)
    return ContextBlock("innocent", "the innocent's block")
""",
    "dictctx": """
from thoth_core import hookimpl

@hookimpl
def pre_spawn_context(turn):
    return {"tag": "x", "text": "a dict"}
""",
    "strctx": """
from thoth_core import hookimpl

@hookimpl
def pre_spawn_context(turn):
    return "a string"
""",
    "backends": """
from thoth_core import hookimpl

class Raising:
    def search(self, query):
        raise RuntimeError("search exploded")
    def close(self):
        pass

class Dicts:
    def search(self, query):
        return [{"id": "x", "score": 1.0}]
    def close(self):
        pass

def broken(runtime, options):
    raise RuntimeError("cannot open the json file")

@hookimpl
def register_episodic_backends(register):
    register("factory-raises", broken)
    register("search-raises", lambda runtime, options: Raising())
    register("dicts", lambda runtime, options: Dicts())
""",
    "cmds": """
from thoth_core import Command, hookimpl

def boom(**_):
    raise RuntimeError("command exploded")

def strict(args):
    return "never called"

def number(**_):
    return 42

async def fine(args, **_):
    return f"fine {args}"

@hookimpl
def register_commands(register):
    register(Command("boom", "raises", boom))
    register(Command("strict", "takes only args", strict))
    register(Command("number", "returns an int", number))
    register(Command("fine", "works", fine))
""",
    "clicmd": """
import click
from thoth_core import hookimpl

@click.command()
def explode():
    raise ValueError("the CLI command exploded")

@hookimpl
def register_cli_commands(cli):
    cli.add_command(explode)
""",
    "typo_hook": """
from thoth_core import hookimpl

@hookimpl
def pre_spawn_contxt(turn):
    pass
""",
    "typo_arg": """
from thoth_core import hookimpl

@hookimpl
def pre_spawn_context(turnn):
    pass
""",
}
ESSENTIAL = "working,procedural"
STALLED = "\n[plugins.blocker]\ndeadline = 0.5\n[plugins.innocent]\ndeadline = 0.3\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SITE: the broken plugins as the distribution thoth-broken-fakes 0.1."""
    target = tmp_path_factory.mktemp("site")
    package = target / "thoth_broken_fakes"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, source in FAKES.items():
        (package / f"{name}.py").write_text(source)
    info = target / "thoth_broken_fakes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thoth-broken-fakes\nVersion: 0.1\n")
    points = [f"{name.replace('_', '-')} = thoth_broken_fakes.{name}" for name in FAKES]
    (info / "entry_points.txt").write_text("[thoth]\n" + "\n".join(points) + "\n")
    return target


@pytest.fixture(scope="module")
def initialised(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An agent home made once by `thoth init`; each test works on a copy."""
    root = tmp_path_factory.mktemp("init") / "home"
    made = run_thoth("init", str(root), env={"THOTH_HOME": None, "THOTH_LOAD_PLUGINS": f"{ESSENTIAL},episodic"})
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture
def home(initialised: Path, thoth_env: Path) -> Path:
    """A fresh copy of the initialised home, keeping its data in itself (not $THOTH_HOME)."""
    copy = thoth_env / "home"
    shutil.copytree(initialised, copy)
    return copy


def thoth(site: Path, home: Path, *args: str, load: str, append: str = "") -> tuple[int, str, str]:
    """Run `thoth` in the home with SITE on the path and only `load` (and the essential plugins) loaded."""
    if append:
        with (home / "thoth.toml").open("a") as file:
            file.write(append)
    env = {"PYTHONPATH": str(site), "THOTH_LOAD_PLUGINS": f"{ESSENTIAL},{load}", "THOTH_HOME": None}
    done = run_thoth(*args, cwd=home, env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


def set_backend(home: Path, backend: str) -> None:
    """`[plugins.episodic] backend` in the home's thoth.toml (`thoth init` wrote the table)."""
    path = home / "thoth.toml"
    text = path.read_text()
    if "[plugins.episodic]\n" not in text:
        text += "\n[plugins.episodic]\n"
    path.write_text(text.replace("[plugins.episodic]\n", f'[plugins.episodic]\nbackend = "{backend}"\n', 1))


def use_replay(home: Path) -> None:
    """`[thoth] model = "replay"`, answering "ok": a home whose doctor has nothing to complain of."""
    path = home / "thoth.toml"
    text = path.read_text()
    assert "\n[thoth]\n" in text
    text = text.replace("\n[thoth]\n", '\n[thoth]\nmodel = "replay"\n', 1)
    path.write_text(text + '\n[models.replay]\nrules = [{ reply = "ok" }]\n')


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr


# --- the context hook: blocked-loop, bad-result, and no innocent blamed --------------------------


@pytest.mark.slow
def test_context_json_blames_the_plugin_that_blocked_the_loop_and_the_wrong_results(site, home):
    load = "blocker,innocent,dictctx,strctx"
    code, out, err = thoth(site, home, "context", "hi", "--peer", "ann", "--json", load=load, append=STALLED)
    assert code == 0, err
    found = json.loads(out)
    status = {call["plugin"]: call["status"] for call in found["calls"]}
    assert status == {
        "blocker": "blocked-loop",
        "innocent": "ok",  # delayed 1.5 s behind the blocker, past its 0.3 s deadline: not its fault
        "dictctx": "bad-result",
        "strctx": "bad-result",
        "working": "ok",
        "procedural": "ok",
    }
    errors = {call["plugin"]: call["error"] for call in found["calls"]}
    assert errors["blocker"].startswith("blocked the event loop for 1.")
    assert errors["dictctx"] == "returned dict, expected a ContextBlock, a list of them or None"
    assert errors["strctx"] == "returned str, expected a ContextBlock, a list of them or None"
    plugins = {block["plugin"] for block in found["blocks"]}
    assert "innocent" in plugins and "blocker" not in plugins  # a blocked-loop result is dropped, as a timeout's is
    no_traceback(err)


@pytest.mark.slow
def test_doctor_shows_the_same_verdicts_and_refused_commands_and_load_failures(site, home):
    use_replay(home)
    code, out, err = thoth(site, home, "doctor", load="blocker,dictctx,cmds,typo-hook", append=STALLED)
    lines = out.splitlines()
    assert code == 1 and "All checks passed." not in out
    assert any(line.startswith("BAD plugin blocker: pre_spawn_context blocked-loop: blocked the") for line in lines)
    assert (
        "BAD plugin dictctx: pre_spawn_context bad-result: returned dict, expected a ContextBlock, a list of them"
        " or None"
    ) in lines
    assert (
        "BAD plugin cmds: /strict refused: its handler strict(args) does not take turn, session, runtime:"
        " accept **_ too"
    ) in lines
    assert (
        "BAD plugin typo-hook: failed to load: wrong signature: unknown hook 'pre_spawn_contxt';"
        " did you mean 'pre_spawn_context'?"
    ) in lines
    assert "ok  plugin working: pre_spawn_context ok" in lines
    no_traceback(err)


# --- episodic backends ---------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "problem"),
    [
        ("factory-raises", "failed to open: RuntimeError: cannot open the json file"),
        ("search-raises", "search failed: RuntimeError: search exploded"),
        ("dicts", "search returned dict, expected a list of Hit"),
    ],
)
def test_recall_with_a_broken_backend_is_one_line_naming_it(site, home, backend, problem):
    set_backend(home, backend)
    code, out, err = thoth(site, home, "episodes", "search", "hi", "--peer", "ann", load="episodic,backends")
    assert code != 0 and out == ""
    assert err.splitlines() == [f"thoth: error: plugin 'backends': episodic backend {backend!r} {problem}"]
    code, out, err = thoth(site, home, "recall", "hi", "--peer", "ann", load="episodic,backends")  # every layer's
    assert (code, out) == (1, "Nothing of ann's matches.\n")
    assert err.splitlines() == [  # the runtime's line on a hook that failed; the other layers still answered
        "thoth: ERROR thoth_core._calls: plugin episodic: recall failed: PluginError: "
        f"plugin 'backends': episodic backend {backend!r} {problem}"
    ]


@pytest.mark.slow
def test_doctor_opens_the_configured_backend_and_searches_it(site, home):
    use_replay(home)
    code, out, err = thoth(site, home, "doctor", load="episodic")
    assert (code, out.splitlines()[-1]) == (0, "All checks passed."), out + err
    assert "ok  episodic: backend 'sqlite' opens and answers a search" in out.splitlines()
    set_backend(home, "jsn")
    code, out, err = thoth(site, home, "doctor", load="episodic")
    assert code == 1 and "All checks passed." not in out
    bad = [line for line in out.splitlines() if line.startswith("BAD episodic: ")]
    assert bad and "unknown episodic backend 'jsn'" in bad[0], out
    no_traceback(err)


@pytest.mark.slow
def test_layers_shows_the_active_episodic_backend(site, home):
    code, out, err = thoth(site, home, "ask", "/layers", "--peer", "ann", load="episodic")
    assert code == 0, err
    [line] = [line for line in out.splitlines() if line.startswith("L3 episodic")]
    assert "backend sqlite" in line
    set_backend(home, "factory-raises")
    code, out, err = thoth(site, home, "ask", "/layers", "--peer", "ann", load="episodic,backends")
    [line] = [line for line in out.splitlines() if line.startswith("L3 episodic")]
    assert code == 0 and line.endswith(
        "error PluginError: plugin 'backends': episodic backend 'factory-raises' failed to open:"
        " RuntimeError: cannot open the json file"
    ), out + err


# --- commands --------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "line"),
    [
        ("/boom", "thoth: error: /boom (plugin cmds) failed: RuntimeError: command exploded"),
        ("/number", "thoth: error: /number (plugin cmds) returned int, expected a str or None"),
        (
            "/strict",
            "thoth: error: /strict (cmds) was refused: its handler strict(args) does not take turn, session,"
            " runtime: accept **_ too",
        ),
    ],
)
def test_a_failing_command_exits_1_with_one_line(site, home, command, line):
    code, out, err = thoth(site, home, "ask", command, "--peer", "ann", load="cmds")
    assert (code, out, err.splitlines()[-1]) == (1, "", line)
    no_traceback(err)


@pytest.mark.slow
def test_a_working_command_of_the_same_plugin_still_answers(site, home):
    code, out, err = thoth(site, home, "ask", "/fine x", "--peer", "ann", load="cmds")
    assert (code, out) == (0, "fine x\n"), err


@pytest.mark.slow
def test_a_plugin_cli_command_that_raises_is_one_line_naming_the_plugin_and_debug_shows_where(site, home):
    code, out, err = thoth(site, home, "explode", load="clicmd")
    assert (code, err.splitlines()) == (
        1,
        [
            "thoth: error: plugin clicmd: `thoth explode` failed: ValueError: the CLI command exploded"
            " (--debug shows the traceback)"
        ],
    )
    code, _, err = thoth(site, home, "--debug", "explode", load="clicmd")
    assert code == 1 and "Traceback" in err and 'raise ValueError("the CLI command exploded")' in err


@pytest.mark.slow
def test_debug_shows_where_a_backend_failed(site, home):
    set_backend(home, "search-raises")
    code, _, err = thoth(site, home, "--debug", "episodes", "search", "hi", "--peer", "ann", load="episodic,backends")
    assert code == 2 and 'raise RuntimeError("search exploded")' in err
    assert err.splitlines()[-1].startswith("thoth: error: plugin 'backends': episodic backend 'search-raises'")


# --- thoth plugins -------------------------------------------------------------------------------


@pytest.mark.slow
def test_plugins_lists_aligned_columns_with_one_line_per_broken_plugin(site, home):
    code, out, err = thoth(site, home, "plugins", load="typo-hook,typo-arg,cmds")
    assert code == 0, err
    header, *rows = out.splitlines()
    starts = [header.index(title) for title in ("DISTRIBUTION", "VERSION", "STATUS", "HOOKS")]
    for row in rows:
        for start in starts:
            assert row[start - 2 : start] == "  " and row[start] != " ", (row, start)
    by_name = {row.split()[0]: row for row in rows}
    assert by_name["typo-arg"][starts[2] :] == (
        "failed   wrong signature: pre_spawn_context(turnn): no argument 'turnn' (the hook passes turn, session);"
        " did you mean 'turn'?"
    )
    assert by_name["cmds"][starts[2] :].startswith("enabled")
    assert "did you mean 'pre_spawn_context'?" in by_name["typo-hook"]


# --- the checks themselves, as properties ---------------------------------------------------------

JUNK = st.one_of(st.integers(), st.text(max_size=5), st.none(), st.dictionaries(st.text(max_size=3), st.integers()))
BLOCKS = st.builds(ContextBlock, st.text(min_size=1, max_size=5), st.text(max_size=10))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(BLOCKS, JUNK), max_size=6))
def test_a_context_result_keeps_exactly_its_blocks_and_is_bad_iff_anything_else_was_in_it(items):
    kept, problem = check("pre_spawn_context", items)
    assert kept == [item for item in items if isinstance(item, ContextBlock)]
    assert (problem is None) == all(isinstance(item, ContextBlock) for item in items)


@settings(max_examples=60, deadline=None)
@given(st.one_of(BLOCKS, JUNK))
def test_a_single_context_result_is_a_block_none_or_bad(item):
    kept, problem = check("pre_spawn_context", item)
    fine = item is None or isinstance(item, ContextBlock)
    assert (kept, problem is None) == ((item, True) if fine else (None, False))


@settings(max_examples=80, deadline=None)
@given(st.sets(st.sampled_from(COMMAND_ARGUMENTS)), st.booleans(), st.booleans())
def test_a_handler_is_refused_iff_it_cannot_take_the_command_arguments(names, var_keyword, extra_required):
    parameters = [*sorted(names), *(["extra"] if extra_required else []), *(["**_"] if var_keyword else [])]
    namespace: dict = {}
    exec(f"def handler({', '.join(parameters)}):\n    return ''", namespace)  # a signature under test
    problem = handler_problem(namespace["handler"])
    acceptable = (var_keyword or names == set(COMMAND_ARGUMENTS)) and not extra_required
    assert (problem is None) == acceptable, problem


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.text(max_size=5), st.none(), st.integers(), st.lists(st.integers(), max_size=2)))
def test_a_command_output_is_text_or_bad(output):
    text, problem = command_output(output)
    assert (problem is None) == (output is None or isinstance(output, str))
    assert text == (output if isinstance(output, str) else "")


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=0, max_value=4), st.one_of(st.integers(), st.just("raise")))
def test_a_timed_coroutine_gives_what_it_would_give_awaited(awaits, outcome):
    async def body():
        for _ in range(awaits):
            await asyncio.sleep(0)
        if outcome == "raise":
            raise ValueError("inside")
        return outcome

    async def both():
        results = []
        for wrap in (lambda c: c, lambda c: _Timed(c, "p")):
            try:
                results.append(("value", await wrap(body())))
            except ValueError as exc:
                results.append(("raised", str(exc)))
        return results

    direct, timed = asyncio.run(both())
    assert direct == timed


def test_a_timed_coroutine_measures_the_step_that_blocked_and_passes_cancellation_in():
    async def blocks():
        await asyncio.sleep(0)
        time.sleep(0.2)
        await asyncio.sleep(10)

    async def run():
        timed = _Timed(blocks(), "p")
        task = asyncio.ensure_future(timed)
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return timed.longest

    assert asyncio.run(run()) >= 0.2


class WrongTypes:
    """Answers each checked hook with the wrong type (and a list with one good item among bad ones)."""

    @hookimpl
    def recall(self):
        return [{"layer": "x", "text": "good"}, "a bare string"]

    @hookimpl
    def turn_tools(self):
        return {"name": "not a list"}

    @hookimpl
    async def layer_status(self):
        return ["not", "a", "dict"]


async def test_wrong_results_of_recall_tools_and_status_are_bad_result_keeping_what_is_usable(make_runtime):
    runtime = make_runtime({"wrong": WrongTypes()})
    [(_, hits, call)] = await runtime.call(
        "recall", query="q", peer="ann", workspace="default", limit=3, runtime=runtime
    )
    assert (hits, call.status) == ([{"layer": "x", "text": "good"}], "bad-result")
    assert call.error == "returned a list holding str (1 of 2 items), expected a list of dicts (RecallHit) or None"
    outcomes = await runtime.call("turn_tools", turn=None, session=await runtime.session(peer="ann", thread="t"))
    [(_, tools, call)] = [outcome for outcome in outcomes if outcome[0] == "wrong"]
    assert (tools, call.status, call.error) == (
        None,
        "bad-result",
        "returned dict, expected a list of tool definitions (dicts with a name)",
    )
    assert await runtime.status(peer="ann") == []
    [(_, _, call)] = await runtime.call("layer_status", workspace="default", peer="ann", runtime=runtime)
    assert (call.status, call.error) == ("bad-result", "returned list, expected a dict (LayerStatus) or None")
