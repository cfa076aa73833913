from __future__ import annotations

import pytest

ENV = (
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "THOTH_CONFIG",
    "THOTH_LOAD_PLUGINS",
    "HONCHO_DISABLED",
    "EPISODIC_DISABLED",
    "REFLECTION_DISABLED",
    "HONCHO_URL",
    "HONCHO_API_KEY",
)


@pytest.fixture(autouse=True)
def _clean_env(thoth_home, monkeypatch, tmp_path):
    """No model, config or plugin selection leaks in from the environment; cwd is the test's folder."""
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
