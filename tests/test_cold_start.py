"""A cold `thoth` imports only what the command needs, when it needs it (no timing: which modules, by which thread).

`thoth ask` and `thoth --help` run as real subprocesses, every first-party plugin loaded, with a
probe in front of the CLI: a meta-path finder notes which thread first imports each heavy
library, and the first `click.echo` to stdout (the reply's first byte) snapshots `sys.modules`.
A heavy import on the main thread or in a plugin's hook thread (`thoth-plugin`) delays the first
byte; one on a warm-up thread (the SDK import, the episodic embedder) is meant to overlap it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

# Libraries a cold command must not import before it needs them (numpy is not here: the episodic
# store computes with it on every turn).
HEAVY = (
    "anthropic",
    "openai",
    "pydantic",
    "httpx",
    "textual",
    "rich",
    "slack_bolt",
    "slack_sdk",
    "mcp",
    "honcho",
    "onnxruntime",
    "tokenizers",
    "usearch",
)
BLOCKING_THREADS = ("MainThread", "thoth-plugin")  # the turn waits for these
DEFERRING = "thoth_core.cli_imports.ReexportFinder"

PROBE = """
import json, os, sys, threading
import click

HEAVY = set(json.loads(os.environ["PROBE_HEAVY"]))
first_importer = {}


class Recorder:
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in HEAVY and top not in first_importer:
            first_importer[top] = threading.current_thread().name
        return None


sys.meta_path.insert(0, Recorder())
echo, seen = click.echo, []


def snapshot():
    loaded = {m: first_importer.get(m, "?") for m in HEAVY if m in sys.modules}
    types = {sdk: sum(m.startswith(sdk + ".types.") for m in list(sys.modules)) for sdk in ("anthropic", "openai")}
    finders = [type(f).__module__ + "." + type(f).__name__ for f in sys.meta_path]
    with open(os.environ["PROBE_OUT"], "w") as out:
        threads = [t.name for t in threading.enumerate()]
        json.dump({"loaded": loaded, "types": types, "threads": threads, "finders": finders}, out)


def probe_echo(*args, **kwargs):
    if not seen and not kwargs.get("err"):
        seen.append(True)
        snapshot()
    return echo(*args, **kwargs)


click.echo = probe_echo
sys.argv = ["thoth", *sys.argv[1:]]
from thoth_core.cli import main

try:
    main()
finally:
    if not seen:
        snapshot()
"""


def probed(tmp_path: Path, *args: str, cwd: Path) -> tuple[subprocess.CompletedProcess[str], dict[str, object]]:
    """Run `thoth ARGS` behind the probe; the process and what was imported (by which thread) at the first byte."""
    out = tmp_path / "probe.json"
    env = {"PROBE_HEAVY": json.dumps(HEAVY), "PROBE_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done, json.loads(out.read_text())


def replay_home(tmp_path: Path) -> Path:
    """An agent home from `thoth init` whose model is the replay model."""
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    replies = tmp_path / "replies.json"
    replies.write_text(json.dumps([{"purpose": "turn", "reply": "Hello from the replay."}, {"reply": "{}"}]))
    for key, value in (("thoth.model", "replay"), ("models.replay.file", str(replies))):
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
    return home


def test_a_replayed_ask_imports_nothing_heavy_on_the_way_to_its_first_byte(tmp_path, monkeypatch):
    home = replay_home(tmp_path)
    monkeypatch.delenv("THOTH_HOME")  # the home's own thoth.toml decides, as for a user in it
    done, probe = probed(tmp_path, "ask", "hello", cwd=home)
    assert done.stdout.startswith("Hello from the replay.")
    loaded: dict[str, str] = probe["loaded"]  # type: ignore[assignment]
    blocking = {module: thread for module, thread in loaded.items() if thread in BLOCKING_THREADS}
    assert not blocking, f"imported on the way to the first byte: {blocking}"
    assert not {"anthropic", "openai"} & set(loaded), "a provider SDK was imported for the replay model"
    assert "usearch" not in loaded, "a store far below the ANN size imported the ANN library"


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_an_sdk_ask_imports_its_sdk_on_a_warm_up_thread(tmp_path, monkeypatch, request, sdk):
    fake = request.getfixturevalue(f"fake_{sdk}")
    fake.replies = ["Hello from the SDK."]
    home = tmp_path / "home"
    assert run_thoth("init", str(home)).returncode == 0
    for key, value in (("thoth.model", sdk), (f"models.{sdk}.base_url", fake.url)):
        assert run_thoth("config", "set", key, value, cwd=home).returncode == 0
    monkeypatch.delenv("THOTH_HOME")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    done, probe = probed(tmp_path, "ask", "hello", cwd=home)
    assert done.stdout.startswith("Hello from the SDK.")
    assert probe["loaded"][sdk] == f"thoth-import-{sdk}"  # the provider plugin's configure hook started it
    assert DEFERRING in probe["finders"]  # the `thoth` process defers the SDK's types packages
    # fewer of its types modules than an eager import (openai 3.63: 467; anthropic 2.17: 2,978; deferred 54 and 2,328)
    assert 0 < probe["types"][sdk] < {"openai": 200, "anthropic": 2700}[sdk], probe["types"]


def test_help_imports_no_heavy_library(tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")  # a configured SDK provider: listing commands needs no SDK
    done, probe = probed(tmp_path, "--help", cwd=tmp_path)
    assert "ask" in done.stdout and "reflect" in done.stdout  # the plugins' commands are listed
    assert probe["loaded"] == {}
    assert DEFERRING in probe["finders"]  # every `thoth` run has the finder; it only acts on the SDKs' types


def test_a_runtime_leaves_the_import_system_alone(tmp_path, fake_openai):
    script = f"""
import sys, threading
from pathlib import Path
from thoth_core.config import Config
from thoth_core.runtime import Runtime
before = list(sys.meta_path), list(sys.path_hooks)
models = {{"openai": {{"base_url": "{fake_openai.url}"}}}}
runtime = Runtime(Config(data={{"thoth": {{"model": "openai"}}, "models": models}}), home=Path("home"))
runtime.model()
for thread in threading.enumerate():
    if thread.name.startswith("thoth-import-"):
        thread.join()
import openai.types
print(before == (list(sys.meta_path), list(sys.path_hooks)), "Completion" in vars(openai.types))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["True", "True"], done.stderr  # the SDK's package loads as it would without Thoth
