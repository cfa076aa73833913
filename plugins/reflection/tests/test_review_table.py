"""The shared table of approvals cases through the CLI: `thoth review [--json] --actor A` lists what A may see, and
`thoth review approve|edit|reject ID --actor A` decides or stops with the policy's one line (exit 2)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from thoth_reflection.cli import review

from thoth_core.testing import make_test_runtime
from thoth_core.testing.approvals import CASES, AdminPlugin, Case, QueuePlugin, item_id, thoth_table

COMMANDS = {"approve": [], "reject": ["--reason", "not now"], "edit": ["--text", "new words"]}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_approvals_table(thoth_home, case: Case) -> None:
    queue = QueuePlugin()
    runtime = make_test_runtime(
        thoth_home, {"queue": queue, "admins": AdminPlugin()}, config={"thoth": thoth_table(case)}
    )
    target = item_id(case.about)
    if case.action == "list":
        listed = CliRunner().invoke(review, ["--json", "--actor", case.actor], obj={"runtime": runtime})
        assert listed.exit_code == 0, listed.output
        assert (target in [item["id"] for item in json.loads(listed.output)]) == case.allowed
        return
    args = [case.action, target, *COMMANDS[case.action], "--actor", case.actor]
    done = CliRunner().invoke(review, args, obj={"runtime": runtime})
    if case.allowed:
        assert done.exit_code == 0 and queue.decided == [(target, case.action, case.actor)], done.output
    else:
        assert done.exit_code != 0 and queue.decided == []
        assert case.refusal in str(done.exception) and "\n" not in str(done.exception)
