"""`thoth ask "/approvals"` as a real process in an initialised home: it exits 0 every time.

Issue 20 item 11 saw it abort 3 times in 10 with a queue full of repeats; this runs it a few times.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from thoth_reflection.store import Store

from thoth_core.testing import run_thoth

RUNS = 5
OBSERVATIONS = ["Lead with the command, then explain.", "Ask which environment first.", "Keep answers short."]


@pytest.mark.parametrize("plugins", ["reflection", None], ids=["reflection-only", "every-installed-plugin"])
def test_approvals_as_a_process_exits_0_every_time_and_lists_each_item_once(
    tmp_path: Path, plugins: str | None
) -> None:
    project, home = tmp_path / "agent", tmp_path / "home"
    env = {"THOTH_HOME": str(home), "THOTH_CONFIG": None, "THOTH_LOAD_PLUGINS": plugins}
    made = run_thoth("init", str(project), env=env, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    store = Store(home / "reflection" / "reflection.db")
    for n, text in enumerate(OBSERVATIONS):
        source = {"session": f"s{n}", "run": f"r{n}", "workspace": "default", "peer": "ann", "thread": "cli"}
        store.add_item(
            f"persona:p{n}", kind="persona-observation", title=text, text=text, source=source, flags=[], payload={}
        )
    store.close()
    runs = [run_thoth("ask", "/approvals", "--peer", "ann", env=env, cwd=project) for _ in range(RUNS)]
    assert [(r.returncode, r.stderr) for r in runs] == [(0, "")] * RUNS
    listed = [sorted(line.split()[0] for line in r.stdout.splitlines() if line.startswith("persona:")) for r in runs]
    assert listed == [["persona:p0", "persona:p1", "persona:p2"]] * RUNS
