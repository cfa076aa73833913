"""Plugin tables: every key a first-party plugin or model provider reads is declared, and no other is accepted."""

from __future__ import annotations

import importlib
import math
import re
import types

import pytest

from thoth_core import ConfigError
from thoth_core.config import Config, check_plugin_tables, declared_keys, with_plugin_defaults
from thoth_core.plugins import make_plugin_manager
from thoth_core.runtime import Runtime
from thoth_core.testing import run_thoth

# Each table -> the module that declares it (the one registered under the plugin's name).
DECLARED_BY = {
    "plugins.working": "thoth_working.plugin",
    "plugins.identity": "thoth_identity.plugin",
    "plugins.episodic": "thoth_episodic.plugin",
    "plugins.procedural": "thoth_procedural.plugin",
    "plugins.reflection": "thoth_reflection.plugin",
    "plugins.blackboard": "thoth_blackboard.plugin",
    "plugins.tui": "thoth_tui.plugin",
    "plugins.slack": "thoth_slack.plugin",
    "plugins.mcp": "thoth_mcp.plugin",
    "plugins.claude-code": "thoth_claude_code.plugin",
    "plugins.serve": "thoth_serve.plugin",
    "models.anthropic": "thoth_models.anthropic_model",
    "models.openai": "thoth_models.openai_model",
    "models.claude-cli": "thoth_models.claude_cli_model",
    "models.replay": "thoth_core.default_plugins.replay_model",
}
MODULES = [importlib.import_module(name) for name in DECLARED_BY.values()]
RUN_WITHOUT_A_MODEL = {"thoth": {"model": "replay"}, "models": {"replay": {"rules": [{"reply": "ok"}]}}}


def toml_of(data: dict) -> str:
    """TOML text of a two-level {section: {table: {key: value}}} config, one table after another."""
    lines = []
    for section, tables in data.items():
        for table, values in tables.items():
            if not isinstance(values, dict):
                lines += [f"[{section}]", f"{table} = {values!r}"]
                continue
            lines.append(f"[{section}.{table}]")
            lines += [f"{key} = {value!r}" for key, value in values.items()]
    return "\n".join(lines).replace("'", '"') + "\n"


def config_of(table: str, values: dict) -> Config:
    section, name = table.split(".", 1)
    data = {section: {name: values}}
    return Config(data=data, text=toml_of(data))


def misspelt(key: str) -> str:
    """The key with its last letter doubled (`model` -> `modell`), the kind of slip a person makes."""
    return key + key[-1]


@pytest.mark.parametrize("table", sorted(DECLARED_BY))
def test_each_first_party_table_is_declared_by_its_plugin(table):
    module = importlib.import_module(DECLARED_BY[table])
    assert table in module.CONFIG_DEFAULTS


CASES = [
    (table, key)
    for table in sorted(DECLARED_BY)
    for key in sorted(declared_keys(MODULES)[table] or {"deadline"})  # tui and mcp have none: the core's then
]


@pytest.mark.parametrize(("table", "key"), CASES, ids=[f"{table}.{key}" for table, key in CASES])
def test_a_misspelt_key_is_refused_naming_file_line_and_the_nearest_key(table, key):
    config = config_of(table, {misspelt(key): 1})
    with pytest.raises(ConfigError) as error:
        check_plugin_tables(config, MODULES)
    expected = f"thoth.toml:2: {table}.{misspelt(key)}: unknown key in [{table}]; did you mean {key!r}?"
    assert str(error.value) == expected


def test_the_core_keys_of_a_plugin_table_are_accepted_but_not_in_a_models_table():
    check_plugin_tables(config_of("plugins.reflection", {"deadline": 3, "background_deadline": 60}), MODULES)
    with pytest.raises(ConfigError, match=r"models.replay.deadline: unknown key in \[models.replay\]"):
        check_plugin_tables(config_of("models.replay", {"deadline": 3}), MODULES)


async def test_a_full_config_built_from_the_declarations_loads_and_configures_every_plugin(tmp_path):
    full = with_plugin_defaults(Config(), make_plugin_manager(Config()).get_plugins())  # every key with a default
    for table in DECLARED_BY:
        section, name = table.split(".", 1)
        assert full[section][name].keys() <= declared_keys(MODULES)[table]
    full["thoth"] = RUN_WITHOUT_A_MODEL["thoth"]
    full["models"]["replay"] |= RUN_WITHOUT_A_MODEL["models"]["replay"]
    runtime = Runtime(Config(data=full), home=tmp_path)  # every first-party plugin, each one's configure run
    try:
        assert all(runtime.pm.has_plugin(table.split(".", 1)[1]) for table in DECLARED_BY if table[:7] == "plugins")
        assert runtime.model().name == "replay"
    finally:
        await runtime.aclose()


def test_a_misspelt_plugin_key_stops_plugin_loading_with_one_line(tmp_path):
    config = config_of("plugins.episodic", {"backend": "sqlite", "tau_day": 3})
    with pytest.raises(ConfigError, match=r"plugins.episodic.tau_day: unknown key .*; did you mean 'tau_days'\?$"):
        make_plugin_manager(config)


def test_a_plugin_that_declares_nothing_keeps_every_key_and_one_may_extend_another_table():
    silent = types.SimpleNamespace(__name__="silent")  # a third-party plugin without CONFIG_DEFAULTS
    check_plugin_tables(config_of("plugins.silent", {"anything": 1, "goes": "here"}), [*MODULES, silent])
    backend = types.SimpleNamespace(__name__="my_store", CONFIG_DEFAULTS={"plugins.episodic": {"shards": 4}})
    check_plugin_tables(config_of("plugins.episodic", {"backend": "my-store", "shards": 8}), [*MODULES, backend])
    with pytest.raises(ConfigError, match="did you mean 'shards'"):
        check_plugin_tables(config_of("plugins.episodic", {"shard": 8}), [*MODULES, backend])


def test_a_table_of_a_plugin_that_is_not_loaded_is_not_checked(monkeypatch):
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "working,procedural")
    pm = make_plugin_manager(config_of("plugins.reflection", {"modle": "x"}))  # reflection is not loaded
    assert not pm.has_plugin("reflection")


def test_review_with_a_misspelt_reflection_key_exits_2_naming_it(tmp_path):
    (tmp_path / "thoth.toml").write_text('[plugins.reflection]\nmodle = "replay"\n')
    result = run_thoth("review", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": "working,procedural,reflection"})
    assert result.returncode == 2 and result.stdout == "", (result.stdout, result.stderr)
    assert result.stderr.strip() == (
        f"thoth: error: {tmp_path / 'thoth.toml'}:2: plugins.reflection.modle: unknown key in [plugins.reflection]; "
        "did you mean 'model'?"
    )


def test_review_with_a_bad_reflection_value_exits_2_instead_of_an_empty_queue(tmp_path):
    (tmp_path / "thoth.toml").write_text("[plugins.reflection]\nmax_tokens = nan\n")
    result = run_thoth("review", cwd=tmp_path, env={"THOTH_LOAD_PLUGINS": "working,procedural,reflection"})
    assert result.returncode == 2 and "Nothing is waiting" not in result.stdout, (result.stdout, result.stderr)
    assert result.stderr.strip().endswith(
        "thoth.toml:2: plugins.reflection.max_tokens: expected a positive integer up to 10,000,000, got nan"
    )


NUMBERS = [  # a number each plugin checks when the runtime starts (configure)
    ("working", "restore_turns"),
    ("identity", "top_k"),
    ("episodic", "tau_days"),
    ("procedural", "max_file_kb"),
    ("reflection", "transcript_tokens"),
    ("blackboard", "ttl"),
    ("claude-code", "budget"),
]


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e300], ids=["nan", "inf", "-inf", "absurd"])
@pytest.mark.parametrize(("plugin", "key"), NUMBERS, ids=[f"{p}.{k}" for p, k in NUMBERS])
def test_a_non_finite_or_absurd_plugin_number_stops_start_up(tmp_path, plugin, key, value):
    config = Config(data={**RUN_WITHOUT_A_MODEL, "plugins": {plugin: {key: value}}})
    with pytest.raises(ConfigError, match=rf"plugins.{plugin}.{key}: expected .*, got {re.escape(repr(value))}$"):
        Runtime(config, home=tmp_path)


@pytest.mark.parametrize("provider", ["anthropic", "openai", "claude-cli", "replay"])
@pytest.mark.parametrize("value", [math.nan, math.inf], ids=["nan", "inf"])
def test_a_non_finite_model_number_is_refused_naming_the_key(tmp_path, monkeypatch, provider, value):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    key = "delay" if provider == "replay" else "timeout"
    needs = {"replay": {"rules": [{"reply": "ok"}]}, "claude-cli": {"command": "sh"}}.get(provider, {})
    table = {**needs, key: value}
    config = Config(data={"thoth": {"model": provider}, "models": {provider: table}})
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "" if provider == "replay" else provider)  # replay is built in
    with pytest.raises(ConfigError, match=rf"models.{provider}.{key}: expected .*, got {value!r}$"):
        Runtime(config, home=tmp_path).model()  # refused at start (thoth_core.schema)


@pytest.mark.parametrize(
    ("check", "value", "message"),
    [
        (lambda c, v: c.number("k", v), True, "expected a non-negative number, got True"),
        (lambda c, v: c.number("k", v), "3", "expected a non-negative number, got '3'"),
        (lambda c, v: c.number("k", v, positive=True), 0, "expected a positive number, got 0"),
        (lambda c, v: c.number("k", v, high=1), 1.5, "expected a non-negative number up to 1, got 1.5"),
        (lambda c, v: c.integer("k", v), 2.0, "expected a non-negative integer, got 2.0"),
        (lambda c, v: c.integer("k", v, low=100, high=10**7), 99, "expected an integer of at least 100 and up to"),
    ],
)
def test_the_number_checks_refuse_with_the_expected_range(check, value, message):
    with pytest.raises(ConfigError, match=rf"^thoth.toml: k: {message}"):
        check(Config(), value)


def test_the_number_checks_return_good_values_in_their_kind():
    config = Config()
    assert config.number("k", 2) == 2.0 and isinstance(config.number("k", 2), float)
    assert config.integer("k", 7, low=1, high=7) == 7
    assert config.number("k", 0.5, positive=True, high=1) == 0.5


def test_a_misspelt_reflection_model_option_is_refused_like_the_providers_own_key(tmp_path):
    config = Config(
        data={
            "thoth": {"model": "openai"},
            "plugins": {"reflection": {"model_options": {"model": "gpt-4.1-nano", "max_token": 500}}},
        }
    )
    with pytest.raises(ConfigError, match=r"model_options.max_token: unknown key of \[models.openai\]; did you mean"):
        Runtime(config, home=tmp_path)
