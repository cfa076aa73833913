"""thoth-hello through the real `thoth` script: `thoth_env` isolates it, `run_thoth` runs it."""

import json

from thoth_core.testing import run_thoth


def test_thoth_context_shows_the_block(thoth_env):
    result = run_thoth("context", "hi", "--peer", "ann", "--json")
    assert result.returncode == 0, result.stderr
    texts = [block["text"] for block in json.loads(result.stdout)["blocks"] if block["plugin"] == "hello"]
    assert texts == ['Start your reply with "Hello, ann!"']


def test_a_misspelt_key_is_refused_and_the_file_kept(thoth_env):
    assert run_thoth("init", "home").returncode == 0
    before = (thoth_env / "home" / "thoth.toml").read_text()
    result = run_thoth("config", "set", "plugins.hello.greting", "Howdy", cwd=thoth_env / "home")
    assert result.returncode == 2
    assert "plugins.hello.greting: unknown key in [plugins.hello]; did you mean 'greeting'?" in result.stderr
    assert (thoth_env / "home" / "thoth.toml").read_text() == before
