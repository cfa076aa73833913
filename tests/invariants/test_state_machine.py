"""The promises of docs/promises.md under random steps and faults, on SQLite and on PostgreSQL.

A fixed seed keeps CI repeatable; `THOTH_INVARIANTS_BUDGET` sets the size: unset, a CI budget
(six short examples of five steps a backend: the first examples Hypothesis tries are its simplest, so more
short ones reach more kinds of step than a few long ones; `derandomize` fixes the seed);
`long`, two hundred examples; a number, that many examples.
Each run's steps, faults and checks go to the terminal summary and to
`thoth-invariants-<backend>.json` in the test's temp dir (printed with -s).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import inv_machine
import pytest
from hypothesis import HealthCheck, Phase, Verbosity, settings
from hypothesis.stateful import run_state_machine_as_test
from inv_harness import RUNS, Summary, remove_root

from thoth_core.testing.postgres import fresh_database

pytestmark = pytest.mark.slow  # long Hypothesis state machine on every backend

# Read at import: the suite's autouse fixture clears THOTH_* variables before each test runs.
BUDGET = os.environ.get("THOTH_INVARIANTS_BUDGET", "")
SHRINK = os.environ.get("THOTH_INVARIANTS_SHRINK", "1") != "0"
VERBOSE = bool(os.environ.get("THOTH_INVARIANTS_VERBOSE"))


def budget() -> tuple[int, int]:
    """(examples, steps per example) for this run."""
    raw = BUDGET
    if raw == "long":
        return 200, 25
    if raw.isdigit():
        return int(raw), 20
    return 6, 5


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_promises_hold_under_random_steps(backend: str, request: pytest.FixtureRequest) -> None:
    """Random turns, kills, forgets, bundles, approvals and faults never break a promise that is switched on."""
    examples, steps = budget()
    root = Path(tempfile.mkdtemp(prefix=f"thoth-inv-{backend}-"))
    root.chmod(0o755)
    machine: Any = type(f"HomeMachine_{backend}", (inv_machine.HomeMachine,), {"backend": backend, "root": root})
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        machine.pg_server = server
        machine.new_storage_url = staticmethod(lambda: fresh_database(server))
    RUNS[backend] = Summary()
    phases = list(Phase) if SHRINK else [Phase.explicit, Phase.generate]
    try:
        run_state_machine_as_test(
            machine,
            settings=settings(
                max_examples=examples,
                stateful_step_count=steps,
                deadline=None,
                derandomize=True,
                database=None,
                phases=phases,
                suppress_health_check=list(HealthCheck),
                verbosity=Verbosity.verbose if VERBOSE else Verbosity.normal,
            ),
        )
    finally:
        report = root.parent / f"thoth-invariants-{backend}.json"
        report.write_text(json.dumps(RUNS[backend].as_dict(), indent=1))
        print(f"\ninvariants[{backend}] ({report}): {RUNS[backend].line()}")
        remove_root(root)
