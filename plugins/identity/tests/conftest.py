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
