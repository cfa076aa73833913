"""A provider of thoth-models chosen where that distribution is not installed: one line, the key and the pip command."""

from __future__ import annotations

import pytest

from thoth_core import ModelNotConfigured
from thoth_core.config import load_config
from thoth_core.default_plugins.uninstalled_model import not_installed, register_models, uninstalled
from thoth_core.plugins import install_hint
from thoth_core.runtime import Runtime


def test_choosing_a_provider_that_is_not_installed_names_the_key_and_the_pip_command(tmp_path):
    (tmp_path / "thoth.toml").write_text('[thoth]\nowner = "ann"\nmodel = "openai"\n')
    runtime = Runtime(load_config(tmp_path / "thoth.toml"), autoload=False, home=tmp_path / "home")
    with pytest.raises(ModelNotConfigured) as caught:
        not_installed("openai")(runtime, {})
    message = str(caught.value)
    assert message.endswith(
        "thoth.toml:3: thoth.model: model provider 'openai' is not installed (pip install thoth-models)"
    )
    assert "\n" not in message


def test_only_the_providers_no_distribution_offers_get_the_stand_in():
    assert uninstalled({"anthropic", "episodic"}) == ["openai", "claude-cli"]
    assert uninstalled({"anthropic", "openai", "claude-cli"}) == []
    assert {install_hint(name) for name in ("anthropic", "openai", "claude-cli")} == {"pip install thoth-models"}


def test_with_thoth_models_installed_no_stand_in_is_registered():
    registered: list[str] = []
    register_models(register=lambda name, factory: registered.append(name))
    assert registered == []  # this environment has thoth-models: its plugins answer to these names
