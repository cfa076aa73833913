import pytest


@pytest.fixture(autouse=True)
def _clean_env(thoth_env):
    """No model, config or switch leaks in from the environment; cwd is the test's folder."""
