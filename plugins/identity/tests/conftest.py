from __future__ import annotations

import pytest
from thoth_identity.fake_honcho import FakeHoncho


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch, tmp_path):
    """No model, Honcho or Thoth settings leak in from the environment."""
    import os

    for name in list(os.environ):
        if name.startswith(("ANTHROPIC_", "HONCHO_", "THOTH_")) and name != "THOTH_HOME":
            monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def honcho_server():
    """A fake Honcho on 127.0.0.1 (ephemeral port), stopped after the test."""
    server = FakeHoncho().start()
    yield server
    server.stop()
