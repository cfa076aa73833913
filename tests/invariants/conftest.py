"""The invariant tests' helpers (`inv_harness`, `inv_checks`, `inv_machine`) are modules of this folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line per backend the state machine ran on: steps, faults, checks (also in its JSON report)."""
    harness = sys.modules.get("inv_harness")
    for backend, summary in getattr(harness, "RUNS", {}).items():
        terminalreporter.write_line(f"invariants[{backend}]: {summary.line()}")
