"""`thoth ask` as a real subprocess: the real SDK streams from the fake Messages API to stdout.

A probe plugin lives in a site directory on PYTHONPATH, described by a hand-written
`.dist-info` (what pip would write), so `thoth` discovers it through its entry point. Its
`post_turn_write` waits until the test has read the whole reply from stdout, and records
whether it did: if the write ran before the reply reached the user, it would wait in vain.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

PROBE = """
import asyncio, json, os
from pathlib import Path
from thoth_core import ContextBlock, hookimpl

@hookimpl
def pre_spawn_context(turn):
    return [ContextBlock(tag="persona", text="You are Thoth, a helpful agent.", stable=True),
            ContextBlock(tag="today", text=f"{turn.peer} asks: {turn.text}")]

@hookimpl
async def post_turn_write(turn, reply):
    if reply.cut_short:  # a failed turn, kept as far as it was shown: no reply for the test to read
        return
    folder = Path(os.environ["PROBE_DIR"])
    for _ in range(200):
        if (folder / "reply-seen").exists():
            break
        await asyncio.sleep(0.05)
    seen = (folder / "reply-seen").exists()
    (folder / "write.json").write_text(json.dumps({"reply": reply.text, "reply_seen_first": seen}))
"""

REPLY = "It is sunny in Cairo today."


@pytest.fixture
def site(tmp_path: Path) -> Path:
    """A site directory with the probe plugin and its entry point."""
    target = tmp_path / "site"
    (target / "thoth_ask_probe").mkdir(parents=True)
    (target / "thoth_ask_probe" / "__init__.py").write_text(PROBE)
    info = target / "thoth_ask_probe-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thoth-ask-probe\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[thoth]\nprobe = thoth_ask_probe\n")
    return target


@pytest.fixture
def env(site: Path, tmp_path: Path, fake_anthropic) -> dict[str, str]:
    """The environment of a `thoth` run against the fake, with only the probe plugin loaded."""
    probe = tmp_path / "probe"
    probe.mkdir()
    return {
        "PYTHONPATH": str(site),
        "THOTH_LOAD_PLUGINS": "probe,anthropic",  # the provider is a plugin too (thoth-models)
        "THOTH_HOME": str(tmp_path / "home"),
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": "test-key",
        "PROBE_DIR": str(probe),
    }


def spawn(*args: str, cwd: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).with_name("thoth")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]
    return subprocess.Popen(
        [*command, *args], cwd=cwd, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def reader(stream) -> queue.Queue[bytes]:
    """Bytes of a pipe as they arrive, read on a thread (b'' at the end)."""
    chunks: queue.Queue[bytes] = queue.Queue()

    def pump() -> None:
        while chunk := os.read(stream.fileno(), 1024):
            chunks.put(chunk)
        chunks.put(b"")

    threading.Thread(target=pump, daemon=True).start()
    return chunks


def read_until(chunks: queue.Queue[bytes], end: bytes, so_far: bytes = b"") -> bytes:
    while end not in so_far:
        chunk = chunks.get(timeout=30)
        if not chunk:
            break
        so_far += chunk
    return so_far


def test_ask_streams_the_reply_and_post_turn_write_runs_after_it_is_printed(fake_anthropic, env, tmp_path):
    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "anthropic"\n[models.anthropic]\nmodel = "claude-haiku-4-5"\ntimeout = 10\nmax_retries = 0\n'
    )
    gate = threading.Event()
    fake_anthropic.replies = [{"match": "weather", "reply": REPLY, "pause": gate}]
    process = spawn("ask", "How is the weather?", "--peer", "ann", "--thread", "t1", cwd=tmp_path, env=env)
    try:
        out = reader(process.stdout)
        first = read_until(out, b" ")
        assert first == b"It ", "the first delta reaches stdout while the rest of the reply is held back"
        gate.set()
        printed = read_until(out, b"\n", first)
        assert printed.decode() == REPLY + "\n"
        assert not (Path(env["PROBE_DIR"]) / "write.json").exists()
        (Path(env["PROBE_DIR"]) / "reply-seen").touch()
        assert process.wait(timeout=30) == 0, process.stderr.read().decode()
    finally:
        gate.set()
        process.kill()
    write = json.loads((Path(env["PROBE_DIR"]) / "write.json").read_text())
    assert write == {"reply": REPLY, "reply_seen_first": True}

    [request] = fake_anthropic.messages_requests
    assert request.body["model"] == "claude-haiku-4-5" and request.body["stream"] is True
    persona, today = request.body["system"]
    assert persona["cache_control"] == {"type": "ephemeral"} and "cache_control" not in today
    assert "You are Thoth" in persona["text"] and "ann asks: How is the weather?" in today["text"]


def test_ask_without_a_model_says_how_to_configure_one(tmp_path):
    result = run_thoth(
        "ask",
        "hi",
        cwd=tmp_path,
        env={
            "THOTH_HOME": str(tmp_path / "home"),
            "THOTH_LOAD_PLUGINS": "",
            "ANTHROPIC_API_KEY": None,
            "ANTHROPIC_BASE_URL": None,
            "THOTH_CONFIG": None,
        },
    )
    assert result.returncode == 2
    assert result.stderr.startswith("thoth: error: no model is configured. Set ANTHROPIC_API_KEY")
    assert len(result.stderr.strip().splitlines()) == 1


def test_ask_with_a_rejected_key_fails_with_one_line(fake_anthropic, env, tmp_path):
    fake_anthropic.api_key = "another-key"
    result = run_thoth("ask", "hi", cwd=tmp_path, env=env)
    assert result.returncode == 2 and result.stdout.strip() == ""
    assert result.stderr.strip().splitlines() == [
        "thoth: error: anthropic: authentication failed (401: invalid x-api-key); "
        "check ANTHROPIC_API_KEY or [models.anthropic] api_key"
    ]


def test_doctor_reports_the_model_reachable_then_unreachable(fake_anthropic, env, tmp_path):
    lines = run_thoth("doctor", cwd=tmp_path, env=env).stdout.splitlines()
    assert f"ok  model: anthropic claude-sonnet-4-6 reachable at {fake_anthropic.url}" in " ".join(lines)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    result = run_thoth("doctor", cwd=tmp_path, env=dict(env, ANTHROPIC_BASE_URL=closed))
    [line] = [line for line in result.stdout.splitlines() if "model:" in line]
    assert line.startswith(f"BAD model: anthropic: cannot reach ANTHROPIC_BASE_URL {closed}")
    assert result.returncode == 1
