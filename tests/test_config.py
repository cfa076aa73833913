"""thoth.toml: one-line errors from the real console script, config get/set, secrets, switches, allow-list."""

from __future__ import annotations

import json
import tomllib
from importlib.metadata import entry_points

import pytest

from thoth_core import ConfigError
from thoth_core.config import Config, load_config, resolve_secrets
from thoth_core.plugins import ENV_SWITCHES, make_plugin_manager
from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

NO_PLUGINS = {"THOTH_LOAD_PLUGINS": ""}


def one_error_line(result) -> str:
    """The single line a failing `thoth` printed; asserts exit 2 and nothing else on stderr."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[thoth\nmodel = "replay"\n', "thoth.toml:1: invalid TOML"),
        ('[thoth]\nmodel = "replay"\nmodel = "x"\n', "thoth.toml:3: invalid TOML"),
        ("[thoht]\nmodel = 'replay'\n", "thoth.toml:1: thoht: unknown section; did you mean 'thoth'?"),
        ("[thoth]\ndeadlin = 2\n", "thoth.toml:2: thoth.deadlin: unknown key in [thoth]; did you mean 'deadline'?"),
        ("[thoth]\ndeadline = nan\n", "thoth.toml:2: thoth.deadline: must be positive and finite, got nan"),
        ("[thoth]\ndeadline = inf\n", "thoth.toml:2: thoth.deadline: must be positive and finite, got inf"),
        ("[budget]\ntotal = 100000000\n", "thoth.toml:2: budget.total: must be positive and below 10,000,000"),
        ("[plugins.replay]\ndeadline = nan\n", "thoth.toml:2: plugins.replay.deadline: expected a positive number"),
        (
            '[models.anthropic]\napi_key = "sk-ant-api03-abc"\n',
            'thoth.toml:2: models.anthropic.api_key: secrets are references, not values: api_key = { "$env"',
        ),
        (
            '[thoth]\nworkspace = "w"\ndeadline = "soon"\n',
            "thoth.toml:3: thoth.deadline: expected a number of seconds, got 'soon'",
        ),
        ("[budget]\ntotal = true\n", "thoth.toml:2: budget.total: expected an integer, got True"),
        (
            '[budget.layers]\nepisodic = "lots"\n',
            "thoth.toml:2: budget.layers.episodic: expected a non-negative integer",
        ),
        ("[budget.layers]\nsemantic = 10\n", "thoth.toml:2: budget.layers.semantic: unknown layer"),
        ("[plugins.replay]\ndeadline = -1\n", "thoth.toml:2: plugins.replay.deadline: expected a positive number"),
        ("[budget]\nlayers = 5\n", "thoth.toml:2: budget.layers: expected a table of per-layer token budgets"),
        ("[models]\nreplay = 5\n", "thoth.toml:2: models.replay: expected a table"),
    ],
    ids=[
        "syntax",
        "duplicate-key",
        "misspelt-section",
        "misspelt-key",
        "nan-deadline",
        "inf-deadline",
        "absurd-budget",
        "nan-plugin-deadline",
        "literal-secret",
        "wrong-type",
        "bool-for-int",
        "layer-type",
        "unknown-layer",
        "bad-deadline",
        "layers-not-a-table",
        "model-not-a-table",
    ],
)
@pytest.mark.parametrize("command", [["plugins"], ["context", "hi", "--peer", "ann"]], ids=["plugins", "context"])
def test_malformed_config_exits_2_with_one_line_naming_file_and_key(tmp_path, toml, expected, command):
    (tmp_path / "thoth.toml").write_text(toml)
    line = one_error_line(run_thoth(*command, cwd=tmp_path, env=NO_PLUGINS))
    assert line.startswith("thoth: error: ") and expected in line


@pytest.mark.parametrize(
    ("toml", "key"),
    [('[plugins]\ndisabled = ["tui"]\n', "plugins.disabled"), ("[plugins.tui]\ncolour = 1\n", "plugins.tui")],
)
def test_a_plugin_named_but_not_installed_is_a_warning_and_a_doctor_finding(tmp_path, toml, key):
    (tmp_path / "thoth.toml").write_text(toml + '[thoth]\nmodel = "replay"\n[models.replay]\nrules = []\n')
    env = {**NO_PLUGINS, "THOTH_LOAD_PLUGINS": "working,procedural"}  # tui is not loaded: as if uninstalled
    result = run_thoth("context", "hi", "--peer", "ann", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "plugin 'tui' is not installed (pip install thoth-tui); running without it" in result.stderr
    assert f"thoth.toml:{2 if key == 'plugins.disabled' else 1}: {key}:" in result.stderr
    doctor = run_thoth("doctor", cwd=tmp_path, env=env)
    assert doctor.returncode == 1
    named = f"BAD plugin tui is named in {tmp_path / 'thoth.toml'} but not installed (pip install thoth-tui)"
    assert named in doctor.stdout


def test_config_get_includes_the_core_and_plugin_defaults_under_the_file(tmp_path):
    (tmp_path / "thoth.toml").write_text('[models.anthropic]\ntimeout = 5\n')
    assert run_thoth("config", "get", "budget.total", cwd=tmp_path, env=NO_PLUGINS).stdout == "6000\n"
    provider = {"THOTH_LOAD_PLUGINS": "anthropic"}  # the provider plugin declares its defaults
    model = run_thoth("config", "get", "models.anthropic.model", cwd=tmp_path, env=provider)
    assert model.stdout == "claude-sonnet-4-6\n"
    assert run_thoth("config", "get", "models.anthropic.timeout", cwd=tmp_path, env=NO_PLUGINS).stdout == "5\n"
    line = one_error_line(run_thoth("config", "get", "plugins.nothing.here", cwd=tmp_path, env=NO_PLUGINS))
    assert line.endswith("thoth.toml: plugins.nothing.here: not set, and no default")


def test_thoth_config_names_the_file(tmp_path):
    (tmp_path / "elsewhere.toml").write_text("[thoth]\nmax_tokens = 1.5\n")
    line = one_error_line(
        run_thoth("plugins", cwd=tmp_path, env={**NO_PLUGINS, "THOTH_CONFIG": str(tmp_path / "elsewhere.toml")})
    )
    assert f"{tmp_path / 'elsewhere.toml'}:2: thoth.max_tokens: expected an integer" in line
    line = one_error_line(run_thoth("plugins", cwd=tmp_path, env={"THOTH_CONFIG": str(tmp_path / "missing.toml")}))
    assert "missing.toml: config file not found" in line


@pytest.mark.parametrize("name", ["working", "procedural"])
def test_essential_plugins_cannot_be_disabled(tmp_path, name):
    (tmp_path / "thoth.toml").write_text(f'[plugins]\ndisabled = ["{name}"]\n')
    line = one_error_line(run_thoth("plugins", cwd=tmp_path, env=NO_PLUGINS))
    assert f"thoth.toml:2: plugins.disabled: plugin '{name}' is essential" in line and "cannot be disabled" in line


def test_config_set_outside_an_agent_home_says_how_to_make_one_and_writes_nothing(tmp_path):
    line = one_error_line(run_thoth("config", "set", "thoth.deadline", "1.5", cwd=tmp_path))
    assert line.startswith(f"thoth: error: no agent home here (no thoth.toml in {tmp_path} or its parents)")
    assert "`thoth init DIR`" in line and not (tmp_path / "thoth.toml").exists()


def test_config_set_then_get_round_trips_through_the_file(tmp_path):
    (tmp_path / "thoth.toml").write_text("")
    assert run_thoth("config", "set", "thoth.deadline", "1.5", cwd=tmp_path).returncode == 0
    assert run_thoth("config", "set", "plugins.replay.greeting", "Hello there", cwd=tmp_path).returncode == 0
    assert run_thoth("config", "set", "budget.layers.episodic", "300", cwd=tmp_path).returncode == 0
    written = tomllib.loads((tmp_path / "thoth.toml").read_text())
    assert written == {
        "thoth": {"deadline": 1.5},
        "plugins": {"replay": {"greeting": "Hello there"}},
        "budget": {"layers": {"episodic": 300}},
    }
    assert run_thoth("config", "get", "thoth.deadline", cwd=tmp_path).stdout == "1.5\n"
    assert run_thoth("config", "get", "plugins.replay.greeting", cwd=tmp_path).stdout == "Hello there\n"
    layers = run_thoth("config", "get", "budget.layers", cwd=tmp_path).stdout
    assert '"episodic": 300' in layers and '"working": 1000' in layers  # defaults merged under the file


def test_config_set_rejects_a_wrong_type_and_leaves_the_file_alone(tmp_path):
    (tmp_path / "thoth.toml").write_text("[thoth]\ndeadline = 2\n")
    line = one_error_line(run_thoth("config", "set", "thoth.deadline", "soon", cwd=tmp_path))
    assert "thoth.deadline: expected a number of seconds, got 'soon'" in line
    assert (tmp_path / "thoth.toml").read_text() == "[thoth]\ndeadline = 2\n"


def test_config_get_of_an_unset_key_fails(tmp_path):
    line = one_error_line(run_thoth("config", "get", "thoth.colour", cwd=tmp_path))
    assert "thoth.colour: not set" in line


def test_config_get_shows_secret_references_not_secrets(tmp_path):
    (tmp_path / "thoth.toml").write_text('[models.anthropic]\napi_key = { "$env" = "MY_KEY" }\n')
    result = run_thoth("config", "get", "models.anthropic.api_key", cwd=tmp_path, env={"MY_KEY": "sk-secret"})
    assert result.returncode == 0 and "MY_KEY" in result.stdout and "sk-secret" not in result.stdout


def test_secret_references_resolve_from_env_and_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HELLO_TOKEN", "from-env")
    (tmp_path / "token").write_text("from-file\n")
    config = Config(
        data={
            "plugins": {
                "hello": {
                    "token": {"$env": "HELLO_TOKEN"},
                    "nested": {"key": {"$file": str(tmp_path / "token")}},
                    "plain": 3,
                }
            }
        }
    )
    assert config.plugin("hello") == {"token": "from-env", "nested": {"key": "from-file"}, "plain": 3}
    assert config.get("plugins.hello.token") == {"$env": "HELLO_TOKEN"}  # the raw config keeps the reference


def test_a_missing_secret_file_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"thoth.toml: plugins.hello.key: cannot read secret file"):
        resolve_secrets({"key": {"$file": str(tmp_path / "nope")}}, where="plugins.hello")


def test_load_config_of_a_missing_default_file_means_defaults(tmp_path):
    config = load_config(tmp_path / "thoth.toml")
    assert config.path is None and config.get("budget.total") == 6000 and config.root == tmp_path


class Layer:
    """A stand-in for a layer plugin registered under a switchable name."""


@pytest.mark.parametrize(("variable", "name"), sorted(ENV_SWITCHES.items()))
def test_env_switches_block_their_layer(monkeypatch, variable, name):
    monkeypatch.setenv(variable, "1")
    pm = make_plugin_manager(Config(), autoload=False)
    assert pm.is_blocked(name) and pm.register(Layer(), name=name) is None
    monkeypatch.setenv(variable, "0")
    pm = make_plugin_manager(Config(), autoload=False)
    assert not pm.is_blocked(name) and pm.register(Layer(), name=name) == name


def test_disabled_in_config_blocks_the_plugin():
    pm = make_plugin_manager(Config(data={"plugins": {"disabled": ["replay"]}}), autoload=False)
    assert pm.is_blocked("replay") and not pm.has_plugin("replay") and pm.has_plugin("commands")


def test_config_set_on_a_file_with_a_syntax_error_names_the_line(tmp_path):
    (tmp_path / "thoth.toml").write_text("[thoth]\ndeadline = = 2\n")
    assert "thoth.toml:2: invalid TOML" in one_error_line(
        run_thoth("config", "set", "thoth.deadline", "3", cwd=tmp_path)
    )


def test_config_set_can_repair_a_wrong_value(tmp_path):
    (tmp_path / "thoth.toml").write_text('[thoth]\ndeadline = "soon"\n')
    assert run_thoth("config", "set", "thoth.deadline", "3", cwd=tmp_path).returncode == 0
    assert run_thoth("config", "get", "thoth.deadline", cwd=tmp_path).stdout == "3\n"


def test_config_set_refuses_to_disable_an_essential_plugin(tmp_path):
    (tmp_path / "thoth.toml").write_text("")
    line = one_error_line(run_thoth("config", "set", "plugins.disabled", '["procedural"]', cwd=tmp_path))
    assert "plugins.disabled: plugin 'procedural' is essential" in line
    assert (tmp_path / "thoth.toml").read_text() == ""


INSTALLED = {point.name for point in entry_points(group="thoth")}


@pytest.mark.parametrize(("variable", "name"), sorted(ENV_SWITCHES.items()))
def test_env_switches_disable_the_installed_layer_in_the_real_cli(tmp_path, variable, name):
    if name not in INSTALLED:
        pytest.skip(f"plugin {name} is not installed")
    result = run_thoth("plugins", "--json", cwd=tmp_path, env={variable: "1", "THOTH_LOAD_PLUGINS": name})
    assert result.returncode == 0, result.stderr
    [row] = [row for row in json.loads(result.stdout) if row["name"] == name]
    assert (row["enabled"], row["hooks"]) == (False, [])


def test_config_set_refuses_a_literal_secret_but_takes_a_reference(tmp_path):
    from thoth_core.config import set_value
    from thoth_core.errors import ConfigError

    path = tmp_path / "thoth.toml"
    with pytest.raises(ConfigError, match="secrets are references, not values"):
        set_value(path, "models.anthropic.api_key", "sk-ant-api03-abcdef")
    assert not path.exists()
    reference = set_value(path, "models.anthropic.api_key", '{ "$env" = "ANTHROPIC_API_KEY" }')
    assert reference == {"$env": "ANTHROPIC_API_KEY"}


def test_config_set_keeps_comments_and_layout(tmp_path):
    from thoth_core.config import load_config, set_value

    path = tmp_path / "thoth.toml"
    original = (
        "# Thoth settings for the team\n"
        "[thoth]\n"
        "deadline = 1.5  # seconds each layer may take\n\n"
        "[plugins.episodic]\n"
        "# keep a year\n"
        "retention_days = 365\n"
    )
    path.write_text(original)
    set_value(path, "thoth.deadline", "2.0")
    set_value(path, "plugins.episodic.tau_days", "7")
    set_value(path, "models.anthropic.api_key", '{ "$env" = "ANTHROPIC_API_KEY" }')
    text = path.read_text()
    for kept in ("# Thoth settings for the team", "# seconds each layer may take", "# keep a year"):
        assert kept in text
    assert "deadline = 2.0" in text and 'api_key = { "$env" = "ANTHROPIC_API_KEY" }' in text
    config = load_config(path)
    assert config.get("thoth.deadline") == 2.0 and config.plugin("episodic")["tau_days"] == 7
    assert config.plugin("episodic")["retention_days"] == 365
