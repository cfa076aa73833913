"""docs/promises.md and the state machine cannot drift: each check it names is a switch, and each switch is named."""

from __future__ import annotations

import re
from pathlib import Path

import inv_machine

PROMISES = (Path(__file__).resolve().parents[2] / "docs" / "promises.md").read_text()


def test_every_check_switch_is_a_documented_promise_and_back() -> None:
    listed = re.findall(r"^\d+\. \*\*[^*]+\*\* \(([^)]*)\)", PROMISES, flags=re.MULTILINE)
    named = {name for group in listed for name in re.findall(r"`(\w+)`", group)}
    assert named, "no promise with its check found in docs/promises.md"
    assert named <= set(inv_machine.CHECKS), f"promises name unknown checks: {sorted(named - set(inv_machine.CHECKS))}"
    undocumented = {name for name in inv_machine.CHECKS if f"`{name}`" not in PROMISES}
    assert not undocumented, f"checks docs/promises.md does not name: {sorted(undocumented)}"


def test_every_switched_off_fault_is_in_the_table() -> None:
    table = PROMISES.split("## Where they stand", 1)[1].split("\nThe switches", 1)[0]
    switched_off = [f'KEPT_UNDER["{k}"]' for k, on in inv_machine.KEPT_UNDER.items() if not on]
    switched_off += [f'ANSWERED_UNDER["{k}"]' for k, on in inv_machine.ANSWERED_UNDER.items() if not on]
    switched_off += [f'FAULTS["{k}"]' for k, on in inv_machine.FAULTS.items() if not on]
    switched_off += [f"`{k}`" for k, on in inv_machine.CHECKS.items() if not on]
    missing = [name for name in switched_off if name not in table]
    assert not missing, f"switched off but not in the table of docs/promises.md: {missing}"
