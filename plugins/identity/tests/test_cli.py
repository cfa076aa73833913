"""`thoth identity ...` through click, with only this plugin loaded.

Commands run under a fresh `ThothGroup` (the process-wide `thoth` group loads plugin
commands once per process, under whatever environment came first).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from thoth_identity.cli import identity

from thoth_core.cli import ThothGroup, ask, forget
from thoth_core.config import Config
from thoth_core.plugins import make_plugin_manager


def thoth_group() -> ThothGroup:
    group = ThothGroup(commands={"ask": ask, "forget": forget, "identity": identity})
    group._plugins_loaded = True
    return group


@pytest.fixture
def thoth(thoth_home, monkeypatch):
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "identity")
    runner = CliRunner()

    def invoke(*args):
        result = runner.invoke(thoth_group(), list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.output

    return invoke


def test_show_export_forget_import_round_trip(thoth, tmp_path):
    thoth("ask", "/remember my name is Ann", "--peer", "ann")
    thoth("ask", "/remember my name is Annie", "--peer", "ann")
    thoth("ask", "/remember I like to sketch on trains", "--peer", "ann")
    shown = thoth("identity", "show", "--peer", "ann")
    assert "ann (default, embedded backend): observations 1, facts 1, fact_history 2" in shown
    assert "name: Ann  [from" in shown and "until" in shown and "name: Annie  [from" in shown and "current" in shown
    assert re.search(r"^  o\d+ I like to sketch on trains  \[explicit, user, 1.0", shown, re.MULTILINE)

    path = tmp_path / "ann.json"
    thoth("identity", "export", "--peer", "ann", "-o", str(path))
    document = json.loads(path.read_text())
    assert document["format"] == "thoth-identity/1" and document["peer"] == "ann"
    assert [f["object"] for f in document["facts"]] == ["Ann", "Annie"]

    receipt = json.loads(thoth("identity", "forget", "--peer", "ann", "--json"))
    assert receipt == {"facts": 2, "observations": 1, "messages": 0, "cached_answers": 0}
    assert "observations 0, facts 0" in thoth("identity", "show", "--peer", "ann")

    assert "Imported into ann-copy: 2 facts, 1 observations, 0 messages" in thoth(
        "identity", "import", str(path), "--peer", "ann-copy"
    )
    assert "name: Annie" in thoth("identity", "show", "--peer", "ann-copy")
    assert "identity: 2 facts, 1 observations" in thoth("forget", "--peer", "ann-copy")


def test_import_rejects_other_files(thoth_home, monkeypatch, tmp_path):
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "identity")
    path = tmp_path / "other.json"
    path.write_text('{"format": "something-else", "peer": "x"}')
    result = CliRunner().invoke(thoth_group(), ["identity", "import", str(path)])
    assert result.exit_code == 2 and "thoth: error:" in result.output and "not a Thoth identity export" in result.output
    path.write_text('{"format": "thoth-identity/1", "peer": "x", "observations": ["a string"]}')
    result = CliRunner().invoke(thoth_group(), ["identity", "import", str(path)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.output.strip().endswith(f"{path}: observations[0]: expected an object, got 'a string'")


def test_honcho_disabled_switches_the_layer_off(monkeypatch):
    assert make_plugin_manager(Config()).has_plugin("identity")
    monkeypatch.setenv("HONCHO_DISABLED", "true")
    assert not make_plugin_manager(Config()).has_plugin("identity")
