"""Short commands exit 0 every time: no thread is left in native code when the interpreter finalizes.

Python 3.11 ends a daemon thread that wakes during finalization with `pthread_exit`, whose
unwinding aborts the process (exit 134) when the thread's stack holds a Rust or C++ frame:
ONNX Runtime, tokenizers, or the Honcho SDK's `validate_call` wrapper (pydantic-core). The
Honcho case is reproduced deterministically: the fake Honcho answers the hung dialectic only
once the process runs its last `atexit` callback, so the answer lands while Python finalizes.
`bench/clean_exits.py --runs 50` is the long form of these tests (with a slow real Honcho too).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from honcho import Honcho
from thoth_identity.fake_honcho import FakeHoncho, free_port
from thoth_identity.honcho_real import CONTEXT_THEN_FINALIZE, ExitSignal

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

RUNS = 6
COMMANDS = [
    ("ask", "/remember I like green tea", "--peer", "ann"),
    ("context", "green tea", "--peer", "ann"),
    ("recall", "green tea", "--peer", "ann"),
]
RELEASE_DELAYS = (0.02, 0.1)  # seconds after the last atexit callback; Python finalizes for longer than that


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_short_command_exits_0_every_time(tmp_path, command):
    env = {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "working,procedural,identity,episodic"}
    codes = [run_thoth(*command, cwd=tmp_path, env=env).returncode for _ in range(RUNS)]
    assert codes == [0] * RUNS


@pytest.fixture
def hung_dialectic(tmp_path):
    """A fake Honcho that knows ann and hangs her dialectic, and a thoth.toml pointing at it."""
    fake = FakeHoncho().start()
    Honcho(base_url=fake.url, workspace_id="w").peer("ann")  # a known peer: the dialectic is asked
    fake.mode, fake.only = "hang", r"/chat$"
    config = tmp_path / "thoth.toml"
    # the SDK's own timeout (4.9 s) outlasts the layer's (about 4.6 s), which leaves a loaded machine time to import it
    config.write_text(
        f'[plugins.identity]\ndeadline = 5.0\nbase_url = "{fake.url}"\nworkspace = "w"\ndialectic_timeout = 4.9\n'
    )
    yield fake, config
    fake.stop()


def test_an_abandoned_dialectic_answered_while_python_finalizes_does_not_abort(tmp_path, hung_dialectic):
    fake, config = hung_dialectic
    signal = ExitSignal(fake.release.set)
    env = {
        **os.environ,
        "THOTH_CONFIG": str(config),
        "THOTH_HOME": str(tmp_path / "home"),
        "THOTH_LOAD_PLUGINS": "identity",
    }
    results = []
    for delay in RELEASE_DELAYS:
        fake.release.clear()
        signal.delay, chats = delay, len(fake.calls("/chat$"))
        child = [sys.executable, "-c", CONTEXT_THEN_FINALIZE, str(signal.port)]
        done = subprocess.run(child, env=env, capture_output=True, text=True, timeout=60)
        assert len(fake.calls("/chat$")) == chats + 1, done.stderr  # the dialectic was asked, and hung
        assert "no answer in time" in done.stderr and '"blocks"' in done.stdout
        results.append((delay, done.returncode, done.stderr[-300:] if done.returncode else ""))
    signal.close()
    assert signal.calls == len(RELEASE_DELAYS)  # every process reached its last atexit callback
    assert [code for _, code, _ in results] == [0] * len(RELEASE_DELAYS), results


def test_thoth_exits_0_when_a_write_left_at_exit_is_answered_while_it_ends(tmp_path):
    """`thoth ask /remember` with Honcho hung: the writer thread is still in the SDK when the command exits."""
    fake = FakeHoncho().start()
    fake.mode = "hang"
    config = tmp_path / "thoth.toml"
    config.write_text(f'[plugins.identity]\nbase_url = "{fake.url}"\nworkspace = "w"\nwrite_retries = 0\n')
    env = {**os.environ, "THOTH_CONFIG": str(config), "THOTH_HOME": str(tmp_path / "home")}
    env["THOTH_LOAD_PLUGINS"] = "working,procedural,identity"
    thoth = Path(sys.executable).with_name("thoth")
    results = []
    try:
        for delay, tea in zip(RELEASE_DELAYS, ("green tea", "mint tea"), strict=True):  # each new: one write each
            fake.release.clear()
            process = subprocess.Popen(
                [str(thoth), "-v", "ask", f"/remember I like {tea}", "--peer", "ann"],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert process.stderr is not None
            for line in process.stderr:  # the backend closes, its write still hung: answer it as the process ends
                if "Honcho writes still running at exit" in line:
                    time.sleep(delay)
                    fake.release.set()
                    break
            else:
                pytest.fail("the identity backend did not close with a write under way")
            rest = process.stderr.read()
            results.append((delay, process.wait(30), rest[-300:]))
    finally:
        fake.stop()
    assert [code for _, code, _ in results] == [0] * len(RELEASE_DELAYS), results


@pytest.mark.parametrize("outage", ["hung", "down"])
def test_with_honcho_hung_or_down_commands_finish_in_time_exit_0_and_keep_the_turn_queued(tmp_path, outage):
    fake = FakeHoncho().start()
    fake.mode = "hang"  # accepts connections, never answers
    url = fake.url if outage == "hung" else f"http://127.0.0.1:{free_port()}"
    config = tmp_path / "thoth.toml"
    config.write_text(
        '[thoth]\nmodel = "replay"\n[models.replay]\nrules = [{reply = "Noted."}]\n'
        f'[plugins.identity]\nbase_url = "{url}"\nworkspace = "w"\n'
    )
    env = {"THOTH_CONFIG": str(config), "THOTH_HOME": str(tmp_path / "home")}
    env["THOTH_LOAD_PLUGINS"] = "working,procedural,identity,episodic"
    try:
        for command in [("ask", "I like green tea"), ("context", "green tea"), ("recall", "green tea")]:
            started = time.monotonic()
            done = run_thoth(*command, "--peer", "ann", cwd=tmp_path, env=env)
            # startup, the 1.5 s identity deadline, then at most SEND_GRACE (2 s) for the turn's write
            assert (done.returncode, time.monotonic() - started < 12) == (0, True), (command, done.stderr)
        shown = run_thoth("identity", "show", "--peer", "ann", cwd=tmp_path, env=env)
    finally:
        fake.stop()
    assert "pending_ingest 2" in shown.stdout  # the turn's two messages wait in the outbox
