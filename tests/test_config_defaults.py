"""Declared defaults apply everywhere (`Config.plugin`, `get`, `section`), and `thoth config set` refuses what
start-up refuses: a misspelt key, a wrong type, a table of no installed plugin (issue 41 items 5 and 6)."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thoth_core import ContextBlock, hookimpl
from thoth_core.config import Config
from thoth_core.testing import context_for, run_thoth

KEYS = st.text("abcdefgh_", min_size=1, max_size=6)
VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.booleans())


def plugin_declaring(defaults: dict[str, object]) -> types.SimpleNamespace:
    return types.SimpleNamespace(CONFIG_DEFAULTS={"plugins.x": defaults})


@given(declared=st.dictionaries(KEYS, VALUES), written=st.dictionaries(KEYS, VALUES.filter(lambda v: v is not None)))
def test_a_plugin_table_is_the_file_over_the_declared_defaults(declared, written):
    config = Config(data={"plugins": {"x": written}} if written else {})
    config.declare([plugin_declaring(declared)])
    expected = {key: value for key, value in declared.items() if value is not None} | written  # None: no default
    assert config.plugin("x") == expected
    assert all(config.get(f"plugins.x.{key}") == value for key, value in expected.items())
    assert config.data == ({"plugins": {"x": written}} if written else {})  # what the file says is kept apart


def test_declaring_after_a_read_is_seen_by_the_next_read():
    config = Config()
    assert config.plugin("x") == {} and config.get("plugins.x.limit") is None
    config.declare([plugin_declaring({"limit": 5})])
    assert config.plugin("x") == {"limit": 5} and config.get("plugins.x.limit") == 5


def test_a_models_table_merges_its_declared_defaults_too():
    config = Config(data={"models": {"m": {"timeout": 9}}})
    config.declare([types.SimpleNamespace(CONFIG_DEFAULTS={"models.m": {"timeout": 30, "model": "small"}})])
    assert config.section("models.m") == {"timeout": 9, "model": "small"}


class Greeter:
    """A plugin that reads its table without repeating the default it declares."""

    CONFIG_DEFAULTS = {"plugins.greeter": {"greeting": "Hello", "punctuation": "!"}}

    @hookimpl
    def pre_spawn_context(self, turn, session):
        table = session.runtime.config.plugin("greeter")
        return ContextBlock(tag="greeting", text=f"{table['greeting']}, {turn.peer}{table['punctuation']}")


@pytest.mark.parametrize(
    ("config", "expected"),
    [({}, "Hello, ann!"), ({"plugins": {"greeter": {"greeting": "Howdy"}}}, "Howdy, ann!")],
)
async def test_a_plugin_reads_its_declared_default_at_run_time(make_runtime, config, expected):
    runtime = make_runtime({"greeter": Greeter()}, config=config)
    [block] = (await context_for(runtime, "hi", peer="ann", thread="t")).blocks
    assert block.text == expected


# --- `thoth config set` in a home made by `thoth init`, with a plugin declaring [plugins.weather] -------------

WEATHER = '"""A third-party plugin declaring its table."""\nCONFIG_DEFAULTS = {"plugins.weather": {"forecast": 3}}\n'


@pytest.fixture
def weather_home(thoth_env: Path) -> tuple[Path, dict[str, str]]:
    """An agent home made by `thoth init`, and the environment in which the `weather` plugin is installed."""
    site = thoth_env / "site"
    info = site / "thoth_weather-0.1.dist-info"
    info.mkdir(parents=True)
    (site / "thoth_weather.py").write_text(WEATHER)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: thoth-weather\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[thoth]\nweather = thoth_weather\n")
    env = {"PYTHONPATH": str(site), "THOTH_LOAD_PLUGINS": "weather"}
    home = thoth_env / "home"
    assert run_thoth("init", str(home), env=env).returncode == 0
    return home, env


def refused(home: Path, env: dict[str, str], key: str, value: str) -> str:
    """The one line `thoth config set key value` printed; asserts exit 2 and thoth.toml unchanged."""
    before = (home / "thoth.toml").read_bytes()
    result = run_thoth("config", "set", key, value, cwd=home, env=env)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr)
    assert (home / "thoth.toml").read_bytes() == before
    return lines[0]


@pytest.mark.slow
def test_config_set_refuses_a_misspelt_plugin_key_with_a_did_you_mean(weather_home):
    home, env = weather_home
    line = refused(home, env, "plugins.weather.forcast", "5")
    assert line == (
        f"thoth: error: {home / 'thoth.toml'}: plugins.weather.forcast: "
        "unknown key in [plugins.weather]; did you mean 'forecast'?"
    )


@pytest.mark.slow
def test_config_set_refuses_a_value_of_the_wrong_type(weather_home):
    home, env = weather_home
    line = refused(home, env, "plugins.weather.forecast", "soon")
    assert line.endswith("plugins.weather.forecast: expected a finite number, got 'soon'")


@pytest.mark.slow
def test_config_set_refuses_a_table_of_no_installed_plugin_naming_the_installed_ones(weather_home):
    home, env = weather_home
    line = refused(home, env, "plugins.wether.forecast", "5")
    assert f"{home / 'thoth.toml'}: plugins.wether: no installed plugin is named 'wether'" in line
    assert "did you mean 'weather'?" in line and "installed: " in line and "episodic" in line


@pytest.mark.slow
def test_config_set_writes_a_good_value_and_get_shows_the_declared_default(weather_home):
    home, env = weather_home
    assert run_thoth("config", "get", "plugins.weather.forecast", cwd=home, env=env).stdout == "3\n"
    result = run_thoth("config", "set", "plugins.weather.forecast", "5", cwd=home, env=env)
    assert result.returncode == 0, result.stderr
    assert run_thoth("config", "get", "plugins.weather.forecast", cwd=home, env=env).stdout == "5\n"


class Checker:
    """A plugin whose configure reads its declared default, as a start-up check would."""

    CONFIG_DEFAULTS = {"plugins.checker": {"limit": 7}}

    def __init__(self) -> None:
        self.seen: object = None

    @hookimpl
    def configure(self, runtime):
        self.seen = runtime.config.plugin("checker")["limit"]


def test_a_plugin_registered_by_make_runtime_sees_its_defaults_in_configure(make_runtime):
    checker = Checker()
    make_runtime({"checker": checker})
    assert checker.seen == 7
