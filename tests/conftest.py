import pytest


@pytest.fixture(autouse=True)
def _isolated_home(thoth_home, monkeypatch, tmp_path):
    """Every core test gets its own THOTH_HOME and no model or config from the environment."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_BASE_URL",
        "THOTH_CONFIG",
        "THOTH_LOAD_PLUGINS",
        "HONCHO_DISABLED",
        "EPISODIC_DISABLED",
        "REFLECTION_DISABLED",
        "HONCHO_URL",
        "HONCHO_API_KEY",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)
