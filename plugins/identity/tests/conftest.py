from __future__ import annotations

import pytest
from thoth_identity.fake_honcho import FakeHoncho


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""


@pytest.fixture
def honcho_server():
    """A fake Honcho on 127.0.0.1 (ephemeral port), stopped after the test."""
    server = FakeHoncho().start()
    yield server
    server.stop()


# The schedule these tests were written for (derivation after each turn, synthesis before each reply);
# test_batching.py runs the default (batched derivation, no synthesis).
PER_TURN = {"derive_every": 1, "synthesis": True}


@pytest.fixture
def make_runtime(make_runtime):
    """The core's factory, deriving after every turn unless a test sets `[plugins.identity] derive_every` itself
    (`batched=True`: the default schedule)."""

    def factory(plugins=None, *, batched=False, **kwargs):
        if not batched:
            config = dict(kwargs.get("config") or {})
            tables = dict(config.get("plugins") or {})
            tables["identity"] = {**PER_TURN, **(tables.get("identity") or {})}
            kwargs["config"] = {**config, "plugins": tables}
        return make_runtime(plugins, **kwargs)

    return factory
