"""Approvals as real processes in an initialised home: `thoth ask "/approvals"` exits 0 every time, and an
approval whose worker is killed around its apply is neither lost nor applied twice.

Issue 20 item 11 saw it abort 3 times in 10 with a queue full of repeats; this runs it a few times.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from thoth_reflection.store import Store

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow  # spawns thoth processes

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


KILLED = """
import os, sys
import thoth_reflection.queue as queue

applied, moment = queue._apply, sys.argv[1]

async def killed(*args, **kwargs):
    if moment == "after":
        await applied(*args, **kwargs)
    os._exit(9)  # the worker dies before (or right after) the apply, before the item is settled

queue._apply = killed
from thoth_core.cli import main

sys.argv = ["thoth", "review", "approve", "persona:p0"]
main()
"""


@pytest.mark.parametrize("moment", ["before", "after"])
def test_an_approval_killed_around_its_apply_stays_pending_and_approving_again_applies_it_once(
    tmp_path: Path, moment: str
) -> None:
    project, home = tmp_path / "agent", tmp_path / "home"
    env = {"THOTH_HOME": str(home), "THOTH_CONFIG": None, "THOTH_LOAD_PLUGINS": None}
    assert run_thoth("init", str(project), env=env, cwd=tmp_path).returncode == 0
    store = Store(home / "reflection" / "reflection.db")
    source = {"session": "s0", "run": "r0", "workspace": "default", "peer": "ann", "thread": "cli"}
    text = OBSERVATIONS[0]
    store.add_item("persona:p0", kind="persona-observation", title=text, text=text, source=source, flags=[], payload={})
    environ = {k: v for k, v in {**os.environ, **env}.items() if v is not None}
    killed = subprocess.run(
        [sys.executable, "-c", KILLED, moment], cwd=project, env=environ, capture_output=True, text=True, timeout=60
    )
    assert killed.returncode == 9, killed.stderr
    rules = project / "persona" / "RULES.md"
    assert (rules.exists() and text in rules.read_text()) == (moment == "after")
    assert store.item("persona:p0")["status"] == "pending"  # not marked approved while unapplied
    store.execute("UPDATE claims SET at = 0")  # the dead worker's claim lapses (after DECISION_SECONDS)
    again = run_thoth("review", "approve", "persona:p0", env=env, cwd=project)
    assert again.returncode == 0, again.stderr
    assert "approved persona:p0" in again.stdout
    assert rules.read_text().count(text) == 1
    assert store.item("persona:p0")["status"] == "approved"
    store.close()


def test_issue_36_a_stranger_at_the_repl_sees_and_approves_nothing_the_owner_reviews_it(tmp_path: Path) -> None:
    """`printf '/approvals\\n/approve note:<id>\\n' | thoth chat --frontend repl --peer nobody4` listed 7 items about
    alice and approved one with the default `founders = []`; MCP said nothing was waiting. Now one policy holds."""
    project, home = tmp_path / "agent", tmp_path / "home"
    env = {"THOTH_HOME": str(home), "THOTH_CONFIG": None, "THOTH_LOAD_PLUGINS": "reflection"}
    assert run_thoth("init", str(project), env=env, cwd=tmp_path).returncode == 0
    store = Store(home / "reflection" / "reflection.db")
    for n in range(3):
        text = f"alice prefers green tea {n}"
        source = {"session": f"s{n}", "run": f"r{n}", "workspace": "default", "peer": "alice", "thread": "t"}
        store.add_item(f"note:n{n}", kind="memory-note", title=text, text=text, source=source, flags=[], payload={})
    store.close()
    stranger = run_thoth(
        "chat", "--frontend", "repl", "--peer", "nobody4", "--thread", "n",
        input="/approvals\n/approve note:n0\n", env=env, cwd=project,
    )  # fmt: skip
    assert stranger.returncode == 0, stranger.stderr
    assert "note:n1" not in stranger.stdout and "green tea" not in stranger.stdout
    assert "nothing is waiting for approval" in stranger.stdout
    assert "nobody4 may not approve note:n0: it is not about you" in stranger.stdout
    alice = run_thoth("review", "--actor", "alice", env=env, cwd=project)
    assert alice.returncode == 0 and all(f"note:n{n}" in alice.stdout for n in range(3))
    withdrawn = run_thoth("review", "reject", "note:n2", "--actor", "alice", "--reason", "mine", env=env, cwd=project)
    assert withdrawn.returncode == 0 and "rejected note:n2" in withdrawn.stdout
    owner = run_thoth("review", "approve", "note:n0", env=env, cwd=project)  # the OS user running thoth owns the home
    assert owner.returncode == 0 and "approved note:n0" in owner.stdout, owner.stderr
    assert "alice prefers green tea 0" in (project / "persona" / "MEMORY.md").read_text()
    store = Store(home / "reflection" / "reflection.db")
    assert [store.item(f"note:n{n}")["status"] for n in range(3)] == ["approved", "pending", "rejected"]
    store.close()
