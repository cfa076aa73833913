"""A third-party plugin, pip-installed outside the shared venv, through the real `thoth` console script.

`examples/thoth-hello` is installed with `pip install --target SITE`, and `thoth` runs with
`PYTHONPATH=SITE`, so its entry point is discovered exactly as an installed plugin's would be,
without touching the shared environment. Misbehaving test plugins (one raises, two sleep past
their deadline, two hold data to forget, one cannot be imported) live in the same SITE as a
distribution described by a hand-written `.dist-info` (the metadata pip itself would write).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from thoth_core.plugins import DEFAULT_PLUGINS
from thoth_core.testing import run_thoth

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "thoth-hello"
DEADLINE = 0.5

FAKES = {
    "raiser": """
from thoth_core import hookimpl

@hookimpl
def pre_spawn_context(turn):
    raise RuntimeError("raiser always fails")

@hookimpl
def forget(peer):
    raise RuntimeError("raiser cannot forget")
""",
    "sleeper": """
import time
from thoth_core import hookimpl

@hookimpl
def pre_spawn_context(turn):
    time.sleep(30)
""",
    "asleeper": """
import asyncio
from thoth_core import hookimpl

@hookimpl
async def pre_spawn_context(turn):
    await asyncio.sleep(30)
""",
    "keeper_a": """
from thoth_core import hookimpl

@hookimpl
def forget(peer, thread, workspace):
    if (workspace, peer) == ("default", "ann"):
        return {"episodes": 3 if thread is None else 1}
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
    "keeper_b": """
from thoth_core import hookimpl

@hookimpl
async def forget(peer, thread):
    if peer == "ann" and thread is None:
        return {"facts": 2, "notes": 1}
""",
    "slow_writer": """
import time
from thoth_core import hookimpl

@hookimpl
def post_turn_write(turn):
    time.sleep(30)
""",
    "disk_full": """
import os
from thoth_core import hookimpl

@hookimpl
def post_turn_write(turn):
    if os.environ.get("DISK_FULL"):
        raise OSError(28, "No space left on device")
    with open(os.environ["WRITTEN"], "a") as file:
        file.write(turn.text + "\\n")
""",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A site directory holding pip-installed thoth-hello and the test-only fake plugins."""
    target = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / "thoth-hello"  # a copy: building writes build/ and *.egg-info
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    pip = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "-q",
        "--no-deps",
        "--disable-pip-version-check",
        "--target",
        str(target),
        str(source),
    ]
    installed = subprocess.run(pip, capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    return with_fakes(target, FAKES, extra=("broken = thoth_test_fakes.missing",))


def with_fakes(target: Path, fakes: dict[str, str], *, extra: tuple[str, ...] = ()) -> Path:
    """TARGET as a site directory holding the fake plugins (name -> source) as distribution thoth-test-fakes."""
    package = target / "thoth_test_fakes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    for name, source in fakes.items():
        (package / f"{name}.py").write_text(source)
    info = target / "thoth_test_fakes-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thoth-test-fakes\nVersion: 0.1\n")
    points = [f"{name.replace('_', '-')} = thoth_test_fakes.{name}" for name in fakes] + list(extra)
    (info / "entry_points.txt").write_text("[thoth]\n" + "\n".join(points) + "\n")
    return target


def thoth(site: Path, cwd: Path, *args: str, load: str | None, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `thoth` with SITE on the path and only the named plugins loaded (None: all installed)."""
    return run_thoth(*args, cwd=cwd, env={"PYTHONPATH": str(site), "THOTH_LOAD_PLUGINS": load, **env})


def context_json(site: Path, cwd: Path, load: str) -> dict:
    result = thoth(site, cwd, "context", "hi there", "--peer", "ann", "--json", load=load)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_example_is_discovered_with_its_distribution_and_hooks(site, tmp_path):
    result = thoth(site, tmp_path, "plugins", "--json", load="hello")
    assert result.returncode == 0, result.stderr
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert rows["hello"] == {
        "name": "hello",
        "distribution": "thoth-hello",
        "version": "0.1",
        "enabled": True,
        "error": None,
        "hooks": ["pre_spawn_context", "register_commands"],
    }
    assert {"replay", "commands"} <= set(rows) and rows["replay"]["distribution"] == "thoth-core"


def test_its_block_appears_in_thoth_context_json(site, tmp_path):
    out = context_json(site, tmp_path, load="hello")
    [block] = [b for b in out["blocks"] if b["plugin"] == "hello"]
    assert (block["tag"], block["layer"], block["stable"]) == ("hello", "other", True)
    assert block["text"] == 'Start your reply with "Hello, ann!"'
    assert block["tokens"] > 0 and out["tokens"] >= block["tokens"] and out["cut"] == []


def test_its_config_table_reaches_it(site, tmp_path):
    (tmp_path / "thoth.toml").write_text('[plugins.hello]\ngreeting = "Howdy"\n')
    [block] = [b for b in context_json(site, tmp_path, load="hello")["blocks"] if b["plugin"] == "hello"]
    assert block["text"] == 'Start your reply with "Howdy, ann!"'
    # thoth-hello declares its keys (CONFIG_DEFAULTS): a key it does not know is one line naming it, not ignored
    (tmp_path / "thoth.toml").write_text('[plugins.hello]\ngreeting = "Howdy"\ncolour = "blue"\n')
    refused = thoth(site, tmp_path, "context", "hi", "--peer", "ann", load="hello")
    assert refused.returncode == 2 and "plugins.hello.colour: unknown key in [plugins.hello]" in refused.stderr


def test_disabling_it_in_thoth_toml_removes_it(site, tmp_path):
    (tmp_path / "thoth.toml").write_text('[plugins]\ndisabled = ["hello"]\n')
    assert [b for b in context_json(site, tmp_path, load="hello")["blocks"] if b["plugin"] == "hello"] == []
    rows = {row["name"]: row for row in json.loads(thoth(site, tmp_path, "plugins", "--json", load="hello").stdout)}
    assert rows["hello"]["enabled"] is False and rows["hello"]["hooks"] == []


def test_its_slash_command_works_without_a_model(site, tmp_path):
    result = thoth(site, tmp_path, "ask", "/hello", "--peer", "ann", load="hello")
    assert (result.returncode, result.stdout) == (0, "Hello, ann!\n"), result.stderr


def test_the_allow_list_loads_only_what_it_names(site, tmp_path):
    none = {row["name"] for row in json.loads(thoth(site, tmp_path, "plugins", "--json", load="").stdout)}
    some = {
        row["name"] for row in json.loads(thoth(site, tmp_path, "plugins", "--json", load="hello, keeper-a").stdout)
    }
    assert "hello" not in none and none <= set(DEFAULT_PLUGINS)  # the core's own
    assert some == none | {"hello", "keeper-a"}


def test_the_allow_list_warns_about_a_name_that_is_not_installed(site, tmp_path):
    result = thoth(site, tmp_path, "plugins", "--json", load="hello,helo")
    assert result.returncode == 0
    assert "THOTH_LOAD_PLUGINS names 'helo', which is not installed" in result.stderr
    assert "hello" in {row["name"] for row in json.loads(result.stdout)}


def test_a_plugin_that_cannot_be_imported_is_reported_not_fatal(site, tmp_path):
    rows = {
        row["name"]: row for row in json.loads(thoth(site, tmp_path, "plugins", "--json", load="hello,broken").stdout)
    }
    assert rows["broken"]["enabled"] is False and "ModuleNotFoundError" in rows["broken"]["error"]
    assert rows["hello"]["enabled"] is True


def test_a_plugin_with_a_misspelt_hook_or_argument_is_reported_not_fatal(site, tmp_path):
    load = "hello,typo-hook,typo-arg"
    rows = {row["name"]: row for row in json.loads(thoth(site, tmp_path, "plugins", "--json", load=load).stdout)}
    typo = "wrong signature: unknown hook 'pre_spawn_contxt'; did you mean 'pre_spawn_context'?"
    assert rows["typo-hook"]["error"] == typo
    assert rows["typo-arg"]["error"] == (
        "wrong signature: pre_spawn_context(turnn): no argument 'turnn' (the hook passes turn, session);"
        " did you mean 'turn'?"
    )
    assert rows["typo-hook"]["enabled"] is rows["typo-arg"]["enabled"] is False
    assert [b["plugin"] for b in context_json(site, tmp_path, load=load)["blocks"]] == ["hello"]


def test_raising_and_sleeping_plugins_do_not_stop_the_turn(site, tmp_path):
    (tmp_path / "thoth.toml").write_text(
        f"[plugins.sleeper]\ndeadline = {DEADLINE}\n[plugins.asleeper]\ndeadline = {DEADLINE}\n"
    )
    env = {"PYTHONPATH": str(site), "THOTH_LOAD_PLUGINS": "hello,raiser,sleeper,asleeper"}
    result = run_thoth("context", "hi there", "--peer", "ann", "--json", cwd=tmp_path, env=env, timeout=20)
    assert result.returncode == 0, result.stderr  # in 20 s: neither the turn nor the exit waited for the 30 s sleeps
    out = json.loads(result.stdout)
    assert [b["plugin"] for b in out["blocks"]] == ["hello"]
    status = {c["plugin"]: (c["status"], c["error"]) for c in out["calls"]}
    assert status["hello"] == ("ok", None)
    assert status["raiser"] == ("error", "RuntimeError: raiser always fails")
    assert status["sleeper"] == status["asleeper"] == ("timeout", f"timed out after {DEADLINE}s")


def test_the_turn_completes_with_a_model_despite_bad_plugins(site, tmp_path):
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "Hello, ann!" }]\n'
        f"[plugins.sleeper]\ndeadline = {DEADLINE}\n"
    )
    result = thoth(site, tmp_path, "ask", "hi", "--peer", "ann", load="hello,raiser,sleeper")
    assert (result.returncode, result.stdout) == (0, "Hello, ann!\n")
    assert "plugin raiser: pre_spawn_context failed: RuntimeError" in result.stderr
    assert "plugin sleeper: pre_spawn_context timed out" in result.stderr


def test_forget_prints_one_combined_receipt(site, tmp_path):
    result = thoth(site, tmp_path, "forget", "--peer", "ann", load="keeper-a,keeper-b,raiser")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "Forgot peer ann:",
        "  keeper-a: 3 episodes",
        "  keeper-b: 2 facts, 1 notes",
        "  raiser: 1 error",
    ]
    one_thread = thoth(site, tmp_path, "forget", "--peer", "ann", "--thread", "t1", "--json", load="keeper-a,keeper-b")
    assert json.loads(one_thread.stdout) == {"keeper-a": {"episodes": 1}}
    nobody = thoth(site, tmp_path, "forget", "--peer", "bob", load="keeper-a,keeper-b")
    assert nobody.stdout.splitlines() == ["Forgot peer bob:", "  nothing was held"]


def test_doctor_reports_what_is_wrong(site, tmp_path):
    result = thoth(site, tmp_path, "doctor", load="hello,broken")
    lines = result.stdout.splitlines()
    assert result.returncode == 1
    assert lines[0] == "ok  config: no thoth.toml, using defaults"
    assert any(line.startswith("BAD plugin broken: failed to load: ModuleNotFoundError") for line in lines)
    assert (
        "BAD plugin working (essential) is not loaded: pip install thoth-working or add it to THOTH_LOAD_PLUGINS"
        in lines
    )
    assert any(line.startswith("ok  storage: ") and line.endswith("is writable") for line in lines)
    assert any(line.startswith("BAD model: no model is configured") for line in lines)
    assert lines[-1] == f"{sum(line.startswith('BAD') for line in lines)} problem(s) found."


def test_doctor_passes_the_model_check_with_replay(site, tmp_path):
    (tmp_path / "thoth.toml").write_text('[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "ok" }]\n')
    lines = thoth(site, tmp_path, "doctor", load="hello").stdout.splitlines()
    assert lines[0] == f"ok  config: {tmp_path / 'thoth.toml'}" or lines[0] == "ok  config: thoth.toml"
    assert "ok  model: replay configured" in lines


def test_a_turn_a_layer_cannot_save_exits_3_and_is_written_at_the_next_start(site, tmp_path):
    (tmp_path / "thoth.toml").write_text('[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "Noted." }]\n')
    written = tmp_path / "written.txt"
    ask = ("ask", "keep this", "--peer", "ann")
    full = thoth(site, tmp_path, *ask, load="disk-full", DISK_FULL="1", WRITTEN=str(written))
    assert full.returncode == 3 and full.stdout == "Noted.\n", full.stderr
    assert "thoth: error: Not saved yet: disk-full (OSError: [Errno 28] No space left" in full.stderr
    assert "kept in the journal and retried at the next start" in full.stderr
    assert not written.exists()
    later = thoth(site, tmp_path, "context", "hi", "--peer", "bob", load="disk-full", WRITTEN=str(written))
    assert later.returncode == 0, later.stderr
    assert written.read_text() == "keep this\n"
    again = thoth(site, tmp_path, "context", "hi", "--peer", "bob", load="disk-full", WRITTEN=str(written))
    assert again.returncode == 0 and written.read_text() == "keep this\n"  # replayed once, then struck off


def test_through_a_running_service_a_turn_a_layer_cannot_save_exits_3_with_the_same_line(tmp_path):
    """All installed plugins and the disk-full fake: the service's client says what in-process says."""
    site = with_fakes(tmp_path / "site", {"disk_full": FAKES["disk_full"]})
    (tmp_path / "thoth.toml").write_text('[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{ reply = "Noted." }]\n')
    written = tmp_path / "written.txt"
    env = {"PYTHONPATH": str(site), "DISK_FULL": "1", "WRITTEN": str(written)}
    environ = {k: v for k, v in {**os.environ, **env}.items() if k != "THOTH_LOAD_PLUGINS"}
    script = Path(sys.executable).with_name("thoth")
    service = subprocess.Popen(
        [str(script), "serve", "--port", "0"], cwd=tmp_path, env=environ, stdout=subprocess.PIPE, text=True
    )
    try:
        assert service.stdout is not None and service.stdout.readline().startswith("THOTH_URL=")
        warm = thoth(site, tmp_path, "ask", "keep this", "--peer", "ann", load=None, **env)
        cold = thoth(site, tmp_path, "ask", "keep that", "--peer", "ann", load=None, THOTH_NO_SERVICE="1", **env)
    finally:
        service.terminate()
        service.wait(60)
    assert warm.returncode == cold.returncode == 3 and warm.stdout == cold.stdout == "Noted.\n", warm.stderr
    last = [done.stderr.splitlines()[-1] for done in (warm, cold)]
    assert last[0] == last[1] and last[0].startswith("thoth: error: Not saved yet: disk-full (OSError: [Errno 28]")
    assert not written.exists()


def test_a_slow_post_turn_write_does_not_hold_the_exit_and_the_turn_stays_journaled(site, tmp_path):
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "replay"\nexit_deadline = 1\n[models.replay]\nrules = [{ reply = "Noted." }]\n'
    )
    started = time.monotonic()
    slow = thoth(site, tmp_path, "ask", "take your time", "--peer", "ann", load="slow-writer")
    assert time.monotonic() - started < 10, "thoth ask waited for the 30 s write"
    assert slow.returncode == 3 and slow.stdout == "Noted.\n", slow.stderr
    assert "post-turn writes unfinished after 1 s; kept in the journal" in slow.stderr
    assert "Not saved yet: post-turn writes (still running after 1 s); kept in the journal" in slow.stderr
    started = time.monotonic()
    later = thoth(site, tmp_path, "context", "hi", "--peer", "bob", load="slow-writer")  # replays, within bounds
    assert later.returncode == 0 and time.monotonic() - started < 10, later.stderr
