"""Short commands exit 0 every time: no native thread (ONNX Runtime, tokenizers) is left running at exit.

`bench/clean_exits.py --runs 100` is the long form of this test.
"""

from __future__ import annotations

import pytest

from thoth_core.testing import run_thoth

RUNS = 6
COMMANDS = [
    ("ask", "/remember I like green tea", "--peer", "ann"),
    ("context", "green tea", "--peer", "ann"),
    ("recall", "green tea", "--peer", "ann"),
]


@pytest.mark.parametrize("command", COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_short_command_exits_0_every_time(tmp_path, command):
    env = {"THOTH_HOME": str(tmp_path / "home"), "THOTH_LOAD_PLUGINS": "working,procedural,identity,episodic"}
    codes = [run_thoth(*command, cwd=tmp_path, env=env).returncode for _ in range(RUNS)]
    assert codes == [0] * RUNS
