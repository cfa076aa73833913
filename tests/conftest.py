import pytest


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""


@pytest.fixture
def slack_env(monkeypatch):
    """The Slack credentials a Slack bridge needs to start, fake."""
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test-token")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "test-signing-secret")
