"""Thoth as a pip user gets it: every wheel built, installed into a fresh virtualenv outside the checkout.

The agent home is made by `thoth init`; the model is the fake Anthropic server. This is the slowest
test of the suite (wheels, a virtualenv, dependencies from pip's cache): about 100 s, 30 of them for the wheels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # spawns thoth processes

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The bin/ folder of a fresh virtualenv with `thoth-agent[all]` installed from freshly built wheels."""
    work = tmp_path_factory.mktemp("install")
    dev = str(ROOT / "scripts" / "dev")
    built = subprocess.run([dev, "wheels", str(work / "wheels")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    venv.create(work / "venv", with_pip=True)
    pip = [str(work / "venv" / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    done = subprocess.run(
        # --no-compile: bytecode is written as the commands below import (18 s of 51 s here went to compiling all)
        [*pip, "install", "-q", "--no-compile", "--find-links", str(work / "wheels"), "thoth-agent[all]"],
        capture_output=True,
        text=True,
        cwd=work,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    check = subprocess.run([*pip, "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    return work / "venv" / "bin"


def thoth(bin_dir: Path, *args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """The installed `thoth`, with an environment that knows nothing of the checkout."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("THOTH_", "ANTHROPIC_", "HONCHO_", "PYTHON"))}
    keep["PATH"] = f"{bin_dir}{os.pathsep}{keep.get('PATH', '')}"
    return subprocess.run(
        [str(bin_dir / "thoth"), *args], cwd=cwd, env={**keep, **env}, capture_output=True, text=True, timeout=120
    )


def test_every_wheel_carries_its_licence_and_metadata(installed):
    python = installed / "python"
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: [bool(d.metadata.get_all('Classifier')), "
        "bool(d.metadata.get_all('Project-URL')), any('LICENSE' in str(f) for f in d.files or [])] "
        "for d in m.distributions() if d.metadata['Name'].startswith('thoth-')}))"
    )
    found = json.loads(subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=True).stdout)
    first_party = {"thoth-core", "thoth-agent"} | {f"thoth-{p.name}" for p in (ROOT / "plugins").iterdir()}
    assert set(found) == first_party
    assert all(all(flags) for flags in found.values()), found


def test_init_context_turn_and_recall_by_meaning_in_a_new_home(installed, tmp_path, fake_anthropic):
    assert not str(installed).startswith(str(ROOT))
    home = tmp_path / "agent"
    made = thoth(installed, "init", str(home), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    plugins = thoth(installed, "plugins", "--json", cwd=home)
    loaded = {p["name"]: p for p in json.loads(plugins.stdout)}
    assert {"working", "identity", "episodic", "procedural", "reflection", "blackboard", "tui", "slack"} <= set(loaded)
    assert not [p for p in loaded.values() if p["error"]], plugins.stdout

    context = thoth(installed, "context", "hi", "--peer", "ann", "--thread", "t", "--json", cwd=home)
    assert context.returncode == 0, context.stderr
    tags = {b["tag"] for b in json.loads(context.stdout)["blocks"]}
    assert {"persona", "skills", "knowledge"} <= tags

    model = {"ANTHROPIC_BASE_URL": fake_anthropic.url, "ANTHROPIC_API_KEY": "test-key"}
    fake_anthropic.replies = [{"reply": "Noted."}]
    for message in ("I adopted a kitten named Miso last spring.", "The quarterly budget review moved to Thursday."):
        turn = thoth(installed, "ask", message, "--peer", "ann", "--thread", "first", cwd=home, **model)
        assert turn.returncode == 0 and "Noted." in turn.stdout, turn.stderr
    assert "bm25" not in turn.stderr.lower()  # no fallback to BM25 alone: the embedder is installed

    # a paraphrase sharing no word with the episode, asked from a new thread
    recall = thoth(installed, "recall", "Which cat do you remember me getting?", "--peer", "ann", "--json", cwd=home)
    assert recall.returncode == 0, recall.stderr
    hits = json.loads(recall.stdout)["hits"]  # every layer's, one list
    assert hits and "kitten named Miso" in json.dumps(hits[0]), recall.stdout
    later = thoth(installed, "context", "Which cat do you remember me getting?", "--peer", "ann", "--thread", "new",
                  "--json", cwd=home)
    assert "kitten named Miso" in later.stdout
    status = subprocess.run(["git", "-C", str(home), "status", "--porcelain"], capture_output=True, text=True)
    assert status.stdout == ""  # the turn's data went to the ignored .thoth/, nothing else changed


@pytest.mark.skipif(sys.platform != "linux", reason="one platform is enough for the wheel contents")
def test_the_installed_embedder_is_the_shipped_model_and_tokenizer(installed):
    code = (
        "from thoth_episodic.embedder import model_files; m, t = model_files(); "
        "print(t.name, m.name, m.parent.parent.name, 'site-packages' in str(t), 'site-packages' in str(m))"
    )
    out = subprocess.run([str(installed / "python"), "-c", code], capture_output=True, text=True, cwd="/")
    assert out.stdout.split() == ["tokenizer.json", "model.onnx", "thoth_episodic", "True", "True"], out.stderr
