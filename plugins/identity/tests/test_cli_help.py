"""`thoth identity` without a subcommand shows its help and succeeds."""

from __future__ import annotations

from thoth_core.testing import run_thoth


def test_identity_without_a_subcommand_shows_its_help(tmp_path):
    env = {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "identity", "THOTH_CONFIG": None}
    shown = run_thoth("identity", cwd=tmp_path, env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("Usage: thoth identity")
    assert "show" in shown.stdout
