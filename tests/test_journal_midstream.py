"""A user's message is kept from the moment it is accepted: `thoth ask` killed mid-stream, a model error.

The real `thoth ask` streams from the fake Anthropic server, which holds the stream after the first
text delta (`pause`); the test reads the child's stdout, SIGKILLs it once the words are shown, and
the next runtime (`thoth context`) replays the journal. Every layer that writes turns (working
transcripts, episodes, identity messages) must then hold the user's words and the reply as far as
it was shown, marked cut short.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from thoth_core import hookimpl
from thoth_core.errors import ModelError
from thoth_core.journal import TurnJournal
from thoth_core.testing import make_test_runtime, run_thoth
from thoth_core.types import CUT_SHORT

pytestmark = pytest.mark.slow  # spawns thoth processes

pytest.importorskip("thoth_working")
pytest.importorskip("thoth_episodic")
pytest.importorskip("thoth_identity")

LAYERS = "working,episodic,identity"


@pytest.fixture
def agent(tmp_path, fake_anthropic):
    """A folder with thoth.toml (the fake Anthropic answering, three layers) and the env to run `thoth` in it."""
    home = tmp_path / "data"
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "anthropic"\nhome = "{home}"\n'
        f'[models.anthropic]\nbase_url = "{fake_anthropic.url}"\nmax_retries = 0\n'
        "[plugins.identity]\nderive = false\n"
    )
    env = {name: None for name in os.environ if name.startswith(("ANTHROPIC_", "OPENAI_", "HONCHO_", "THOTH_"))}
    env |= {"THOTH_LOAD_PLUGINS": LAYERS + ",anthropic", "ANTHROPIC_API_KEY": "test-key"}
    return tmp_path, home, env


def ask_until_shown(
    folder: Path, env: dict, message: str, shown: bytes, *, kill: bool = True
) -> tuple[subprocess.Popen, bytes]:
    """Start `thoth ask`; SIGKILL it once `shown` is on its stdout (or let it run); the process, what it showed."""
    script = Path(sys.executable).with_name("thoth")
    environ = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    process = subprocess.Popen(
        [str(script), "ask", message, "--peer", "ann", "--thread", "t"],
        cwd=folder,
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    os.set_blocking(process.stdout.fileno(), False)
    seen = b""
    deadline = time.monotonic() + 60
    while shown not in seen:
        assert process.poll() is None, f"thoth ask ended first: {seen!r} {process.stderr.read()!r}"
        assert time.monotonic() < deadline, f"never shown: {seen!r}"
        seen += process.stdout.read() or b""
        time.sleep(0.005)
    if kill:
        process.send_signal(signal.SIGKILL)
        process.wait()
    return process, seen


def stored_turns(folder: Path, home: Path, env: dict, message: str) -> dict[str, list[tuple[str, bool]]]:
    """Per layer, the reply stored with this message (and whether marked cut short)."""
    transcripts = [
        json.loads(line) for path in home.rglob("*.jsonl") for line in path.read_text().splitlines() if line.strip()
    ]
    working = [
        (e["assistant"], bool(e.get("cut_short")))
        for e in transcripts
        if e.get("type") == "turn" and e.get("user") == message
    ]
    listed = run_thoth("episodes", "list", "--peer", "ann", "--limit", "0", "--json", cwd=folder, env=env)
    assert listed.returncode == 0, listed.stderr
    episodes = [json.loads(line) for line in listed.stdout.splitlines() if line.strip()]
    episodic = [(e["assistant"], e["assistant"].endswith(CUT_SHORT)) for e in episodes if e["user"] == message]
    exported = run_thoth("identity", "export", "--peer", "ann", cwd=folder, env=env)
    assert exported.returncode == 0, exported.stderr
    identity = [(text, text.endswith(CUT_SHORT)) for text in _identity_replies(exported.stdout, message)]
    return {"working": working, "episodic": episodic, "identity": identity}


def _identity_replies(export: str, message: str) -> list[str]:
    """The assistant messages that follow this user message in an identity export."""
    data = json.loads(export)
    messages = [m for m in _find_messages(data)]
    found = []
    for i, item in enumerate(messages):
        if item.get("content") == message and i + 1 < len(messages):
            found.append(messages[i + 1]["content"])
    return found


def _find_messages(value: object) -> list[dict]:
    """Every dict with a `role` and `content` anywhere in the export, in order."""
    if isinstance(value, dict):
        if "role" in value and "content" in value:
            return [value]
        return [m for v in value.values() for m in _find_messages(v)]
    if isinstance(value, list):
        return [m for v in value for m in _find_messages(v)]
    return []


def replay(folder: Path, env: dict) -> None:
    """Start the next runtime (it replays the journal) and let it finish its writes."""
    started = run_thoth("context", "hello", "--peer", "bob", "--thread", "after", cwd=folder, env=env)
    assert started.returncode == 0, started.stderr


@pytest.mark.parametrize(
    "reply, shown, kept",
    [
        ("First words, then a long tail that never arrives.", b"First", "First \n" + CUT_SHORT),  # the first words
        ("Done.", b"Done.", "Done.\n" + CUT_SHORT),  # the last word, before the stream's end event
    ],
    ids=["first-words", "last-word"],
)
def test_a_kill_mid_stream_keeps_the_message_and_the_reply_as_shown_in_every_layer(
    agent, fake_anthropic, reply, shown, kept
):
    folder, home, env = agent
    hold = threading.Event()
    fake_anthropic.replies = [{"reply": reply, "pause": hold}]
    message = "my locker code is under the blue mug"
    try:
        ask_until_shown(folder, env, message, shown)
    finally:
        hold.set()
    pending = TurnJournal(home / "journal.db").pending()
    assert [(e.turn.text, e.reply.text, e.reply.cut_short) for e in pending] == [(message, kept, True)]
    replay(folder, env)
    assert stored_turns(folder, home, env, message) == {layer: [(kept, True)] for layer in LAYERS.split(",")}
    assert TurnJournal(home / "journal.db").pending() == []


def test_another_process_leaves_a_live_streaming_turn_alone(agent, fake_anthropic):
    folder, home, env = agent
    hold = threading.Event()
    fake_anthropic.replies = [{"match": "live", "reply": "Still talking, and now done.", "pause": hold}]
    message = "a live turn about the garden"
    process, seen = ask_until_shown(folder, env, message, b"Still", kill=False)
    try:
        replay(folder, env)  # another runtime starts while the stream is held
        (entry,) = TurnJournal(home / "journal.db").pending()  # the live turn's row, left to its process
        assert (entry.turn.text, entry.reply.text, entry.reply.cut_short) == (message, "Still \n" + CUT_SHORT, True)
        assert stored_turns(folder, home, env, message) == {layer: [] for layer in LAYERS.split(",")}
    finally:
        hold.set()
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert (seen + out).decode() == "Still talking, and now done.\n"
    whole = "Still talking, and now done."
    assert stored_turns(folder, home, env, message) == {layer: [(whole, False)] for layer in LAYERS.split(",")}


def test_forget_removes_a_killed_turns_row(agent, fake_anthropic):
    folder, home, env = agent
    hold = threading.Event()
    fake_anthropic.replies = [{"reply": "Noted the zqxcode411 plan.", "pause": hold}]
    try:
        ask_until_shown(folder, env, "the zqxsecret907 plan", b"Noted")
    finally:
        hold.set()
    assert len(TurnJournal(home / "journal.db").pending()) == 1
    forgot = run_thoth("forget", "--peer", "ann", "--json", cwd=folder, env=env)
    assert forgot.returncode == 0, forgot.stderr
    assert TurnJournal(home / "journal.db").pending() == []
    left = [str(p) for p in home.rglob("*") if p.is_file() and b"zqxsecret907" in p.read_bytes()]
    assert left == []


class Recorder:
    """A layer that records each post-turn write."""

    def __init__(self) -> None:
        self.written: list[tuple[str, str, bool]] = []

    @hookimpl
    def post_turn_write(self, turn, reply, session):
        self.written.append((turn.text, reply.text, reply.cut_short))


async def test_a_model_error_mid_stream_keeps_the_message_and_the_words_shown(tmp_path, fake_anthropic):
    fake_anthropic.fail_with(529, mid_stream=True)
    fake_anthropic.replies = ["Partly there before the overload."]
    layer = Recorder()
    models = {"anthropic": {"base_url": fake_anthropic.url, "api_key": "k", "max_retries": 0}}
    runtime = make_test_runtime(tmp_path, {"layer": layer}, config={"thoth": {"model": "anthropic"}, "models": models})
    shown = []
    with pytest.raises(ModelError):
        await runtime.turn("will this get through?", peer="ann", thread="t", on_delta=shown.append)
    await runtime.drain()
    assert shown == ["Partly "]
    assert layer.written == [("will this get through?", "Partly \n" + CUT_SHORT, True)]
    error = (await runtime.session(peer="ann", thread="t")).transcript[-1]
    assert (error["type"], error["user"], error["assistant"], error["cut_short"]) == (
        "error",
        "will this get through?",
        "Partly \n" + CUT_SHORT,
        True,
    )
    assert runtime.journal.pending() == [] and runtime.unsaved == []
    await runtime.aclose()


async def test_a_model_error_before_any_word_keeps_the_message(tmp_path, fake_anthropic):
    fake_anthropic.fail_with(401)
    layer = Recorder()
    models = {"anthropic": {"base_url": fake_anthropic.url, "api_key": "k", "max_retries": 0}}
    runtime = make_test_runtime(tmp_path, {"layer": layer}, config={"thoth": {"model": "anthropic"}, "models": models})
    with pytest.raises(ModelError):
        await runtime.turn("hello there", peer="ann", thread="t")
    await runtime.drain()
    assert layer.written == [("hello there", CUT_SHORT, True)]
    await runtime.aclose()


async def test_each_shown_batch_is_journaled_before_it_is_shown(tmp_path):
    runtime = make_test_runtime(
        tmp_path,
        {"layer": Recorder()},
        config={"models": {"replay": {"delay": 0.02, "rules": [{"reply": "one two three four five six seven eight"}]}}},
    )
    journaled_when_shown = []

    def show(piece: str) -> None:
        journaled_when_shown.append((piece, TurnJournal(tmp_path / "journal.db").pending()[0].reply.text))

    await runtime.turn("count to ten", peer="ann", thread="t", on_delta=show)
    shown = ""
    for piece, journaled in journaled_when_shown:  # what follows the stream's end comes after the whole reply
        shown += piece
        assert journaled.startswith(shown), (shown, journaled)
    assert journaled_when_shown[0][1] == "one \n" + CUT_SHORT
    assert journaled_when_shown[-1][1] == "one two three four five six seven eight"
    batches = {journaled for _, journaled in journaled_when_shown}
    assert 3 <= len(batches) < len(journaled_when_shown)  # batched: fewer syncs than pieces
    await runtime.aclose()


async def test_a_cancelled_turn_is_kept_as_far_as_it_was_shown(tmp_path):
    import asyncio

    layer = Recorder()
    runtime = make_test_runtime(
        tmp_path,
        {"layer": layer},
        config={"models": {"replay": {"delay": 0.05, "rules": [{"reply": "a long answer the person stops halfway"}]}}},
    )
    shown: list[str] = []
    task = asyncio.ensure_future(runtime.turn("tell me a story", peer="ann", thread="t", on_delta=shown.append))
    while len(shown) < 3:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await runtime.drain()
    ((text, reply, cut),) = layer.written
    assert (text, cut) == ("tell me a story", True)
    assert reply.startswith("".join(shown)) and reply.endswith(CUT_SHORT)
    assert runtime.journal.pending() == []
    await runtime.aclose()


class SplitSecretModel:
    """A model whose reply streams a secret in two pieces, slowly enough for a batch to end between them."""

    name = "split"
    SECRET = "sk-ant-api03-" + "Q" * 40 + "-" + "w" * 12

    async def stream(self, request):
        import asyncio

        for piece in ["Your key is ", self.SECRET[:20], self.SECRET[20:], " and that is all."]:
            await asyncio.sleep(0.2)
            yield piece


class SplitSecretModels:
    @hookimpl
    def register_models(self, register):
        register("split", lambda runtime, section: SplitSecretModel())


async def test_a_secret_split_across_batches_is_never_journaled_in_part(tmp_path):
    plugins = {"layer": Recorder(), "models": SplitSecretModels()}
    runtime = make_test_runtime(tmp_path, plugins, config={"thoth": {"model": "split"}})
    journaled = []

    def show(piece: str) -> None:
        journaled.append(TurnJournal(tmp_path / "journal.db").pending()[0].reply.text)

    await runtime.turn("what is my key?", peer="ann", thread="t", on_delta=show)
    prefix = SplitSecretModel.SECRET[:14]
    assert journaled and not [text for text in journaled if prefix in text]
    final = journaled[-1]
    assert final == "Your key is [REDACTED:anthropic-key] and that is all."
    for text in journaled:  # each state is the whole reply or a cut-short prefix of it (however batches fell)
        assert text == final or (text.endswith(CUT_SHORT) and final.startswith(text.removesuffix("\n" + CUT_SHORT)))
    raw = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert prefix.encode() not in raw
    await runtime.aclose()
