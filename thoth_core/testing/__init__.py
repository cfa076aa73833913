"""The conformance kit for plugin authors: a pytest plugin (entry point `pytest11`).

Fixtures: `thoth_home` (an empty data dir, also set as `$THOTH_HOME`), `thoth_env` (a clean
environment and working directory for tests that run `thoth`; the ini option `thoth_plugins`
names the installed plugins it loads) and `make_runtime` (a runtime with only the plugins you
name and the `replay` model, or the installed provider that `thoth.model` names). Async tests
need `asyncio_mode = "auto"` or a mark on each (a module-level `pytestmark` warns on sync tests);
docs/writing-plugins.md section 6 has an example of each part. Checks: call
`await check_layer_plugin(runtime, "NAME")` from an async test; it writes turns for one
peer and asserts nothing of them reaches another peer's context (any plugin's block), the
plugin stays inside its layer budget (nothing of it cut) and deadline, and that after `forget`
no block shows them; `expect_recall=True` asserts the peer's own new thread does show them.
`run_thoth(*args)` runs the real `thoth` console script for CLI tests. `fake_anthropic` is a fake
Messages API on 127.0.0.1 for the real `anthropic` SDK (see `thoth_core.testing.fake_anthropic`),
`fake_openai` a fake Chat Completions API for the real `openai` SDK (`thoth_core.testing.fake_openai`).
`storage_url` is a fresh database on a real PostgreSQL (`pg_server`, from the `pgserver` wheel), for `[storage] url`;
`storage_config` runs a test on both dialects (its value is the runtime config: `{}`, or `[storage] url`).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from thoth_core.budget import block_tokens
from thoth_core.config import Config
from thoth_core.runtime import Runtime
from thoth_core.testing.fake_anthropic import FakeAnthropic
from thoth_core.testing.fake_openai import FakeOpenAI
from thoth_core.testing.postgres import pg_server, storage_config, storage_url  # noqa: F401 - this plugin's fixtures
from thoth_core.types import Turn

__all__ = [
    "FakeAnthropic",
    "FakeOpenAI",
    "check_layer_plugin",
    "context_for",
    "fake_anthropic",
    "fake_openai",
    "make_test_runtime",
    "run_thoth",
]


def make_test_runtime(
    home: Path,
    plugins: dict[str, object] | None = None,
    *,
    config: dict[str, Any] | None = None,
    replies: list[dict[str, Any]] | None = None,
    root: Path | None = None,
) -> Runtime:
    """A runtime with only the given plugins (name -> module or object) and a replay model.

    A `thoth.model` in `config` naming an installed provider plugin (`anthropic`, `openai`, ...) registers it too.
    """
    data: dict[str, Any] = {"thoth": {"model": "replay"}, "models": {"replay": {"rules": replies or [{"reply": "ok"}]}}}
    for key, value in (config or {}).items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    path = (root / "thoth.toml") if root else None
    runtime = Runtime(Config(data=data, path=path), autoload=False, home=home)
    for name, plugin in (plugins or {}).items():
        runtime.register(plugin, name=name)
    model = runtime.model_name()
    if model is not None and model not in runtime.models:  # a provider of another distribution, e.g. thoth-models
        for entry in entry_points(group="thoth", name=model):
            runtime.register(entry.load(), name=model)
    return runtime


@pytest.fixture
def thoth_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Thoth data directory, also exported as THOTH_HOME."""
    home = tmp_path / "thoth-home"
    home.mkdir()
    monkeypatch.setenv("THOTH_HOME", str(home))
    return home


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "thoth_plugins",
        "Installed plugins the tests load (THOTH_LOAD_PLUGINS under `thoth_env`); others installed are ignored",
        type="args",
        default=[],
    )


@pytest.fixture
def thoth_env(
    thoth_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, request: pytest.FixtureRequest
) -> Path:
    """A clean environment: no ANTHROPIC_*, OPENAI_*, HONCHO_*, THOTH_* or *_DISABLED variables
    (THOTH_HOME is `thoth_home`; XDG_STATE_HOME, where turns a home could not take are kept, is in
    the test's folder), and the test's own folder as working directory.

    With the ini option `thoth_plugins` set, only those installed plugins load (THOTH_LOAD_PLUGINS),
    so the suite passes whatever else is installed in its environment.
    """
    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "OPENAI_", "HONCHO_", "THOTH_")) or name.endswith("_DISABLED"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("THOTH_HOME", str(thoth_home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    plugins = request.config.getini("thoth_plugins")
    if plugins:
        monkeypatch.setenv("THOTH_LOAD_PLUGINS", ",".join(plugins))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def make_runtime(thoth_home: Path) -> Iterator[Callable[..., Runtime]]:
    """Factory: `make_runtime({"name": plugin_module}, config={...}, replies=[...])`."""
    made: list[Runtime] = []

    def factory(plugins: dict[str, object] | None = None, **kwargs: Any) -> Runtime:
        runtime = make_test_runtime(thoth_home, plugins, **kwargs)
        made.append(runtime)
        return runtime

    yield factory
    for runtime in made:
        try:
            asyncio.run(runtime.aclose())  # what the test left running is finished, plugin state closed
        except Exception as exc:  # noqa: BLE001 - a runtime that fails to close must not fail the test
            warnings.warn(f"make_runtime: closing a runtime failed: {exc!r}", stacklevel=1)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """A fake Anthropic Messages API on 127.0.0.1: `.url`, `.replies`, `.requests`, `.fail_with(status)`."""
    fake = FakeAnthropic().start()
    try:
        yield fake
    finally:
        fake.stop()


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A fake OpenAI Chat Completions API on 127.0.0.1: `.url` (ends in /v1), `.replies`, `.requests`, `.fail_with`."""
    fake = FakeOpenAI().start()
    try:
        yield fake
    finally:
        fake.stop()


def run_thoth(
    *args: str,
    cwd: Path | None = None,
    env: dict[str, str | None] | None = None,
    timeout: float = 60,
    input: str | None = None,  # noqa: A002 - subprocess.run's name
) -> subprocess.CompletedProcess[str]:
    """Run the real `thoth` console script of this environment; env entries set to None are removed."""
    script = Path(sys.executable).with_name("thoth")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "thoth_core.cli"]
    environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if v is not None}
    return subprocess.run(
        [*command, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=timeout, input=input or ""
    )


async def context_for(runtime: Runtime, text: str, *, peer: str, thread: str) -> Any:
    """The assembly a turn with this text would get (no model call)."""
    session = await runtime.session(peer=peer, thread=thread)
    return await runtime.context(Turn(text, peer, thread, session.workspace), session)


async def check_layer_plugin(
    runtime: Runtime, name: str, *, turns: int = 3, expect_recall: bool = False, secret: str | None = None
) -> None:
    """Assert isolation, budget, deadline and forget for one layer plugin.

    `expect_recall=True` also asserts alice's own new thread shows the secret, so a plugin that
    loses data cannot pass the forget check without holding anything; pass `secret` to script
    a model reply that contains it (default: a fresh random codeword).
    """
    secret = secret or f"codeword-{uuid.uuid4().hex[:10]}"
    for i in range(turns):
        await runtime.turn(f"Remember that my codeword is {secret} (note {i}).", peer="alice", thread=f"alice-{i}")
    await runtime.drain()
    await runtime.end_session(await runtime.session(peer="alice", thread="alice-0"), "done")
    await runtime.drain()

    other = await context_for(runtime, f"What is my codeword? {secret}?", peer="bob", thread="bob-1")
    leaked = [f"{b.plugin}:{b.tag}" for b in other.blocks if secret in b.text]
    assert not leaked, f"{', '.join(leaked)} leaked alice's data into bob's context (checking {name})"

    own = await context_for(runtime, "What is my codeword?", peer="alice", thread="alice-new")
    if expect_recall:
        assert secret in own.system, f"plugin {name} does not show alice's data in her own new thread"
    layer_budgets = runtime.config.layer_budgets
    for assembly in (own, other):
        for call in assembly.calls:
            if call.plugin == name:
                assert call.status == "ok", f"plugin {name}: pre_spawn_context {call.status}: {call.error}"
                assert call.seconds <= runtime.deadline_for(name), f"plugin {name} took {call.seconds:.3f}s"
        layer = runtime.layer_of(name)
        if layer in layer_budgets:
            tokens = sum(block_tokens(b) for b in assembly.blocks if b.layer == layer)
            assert tokens <= layer_budgets[layer], f"layer {layer} used {tokens} > {layer_budgets[layer]} tokens"
        over = [f"{c.tag}: {c.tokens} tokens ({c.reason})" for c in assembly.cuts if c.plugin == name]
        assert not over, f"plugin {name} gave more context than its budget allows, so the core cut it: {over}"

    await runtime.forget(peer="alice")
    await runtime.drain()
    after = await context_for(runtime, f"What is my codeword? {secret}", peer="alice", thread="alice-after")
    remaining = [f"{b.plugin}:{b.tag}" for b in after.blocks if secret in b.text]
    assert not remaining, f"{', '.join(remaining)} still shows alice's data after forget (checking {name})"
