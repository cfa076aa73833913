"""The failures the state machine found, each as its shrunk sequence of steps, checked with every promise on.

A failure another part of issue 35 is fixing is marked `xfail(strict=True)`: it turns red once
fixed, and then its mark goes (and its switch in `inv_machine.CHECKS`/`FAULTS` is turned on).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import inv_machine
import pytest
from inv_harness import remove_root

from thoth_core.testing.postgres import fresh_database

pytestmark = pytest.mark.slow  # spawns thoth processes and kills them mid-turn


def make_machine(backend: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A state machine on a fresh home, every promise checked whatever the CI switches say."""
    for switches in ("CHECKS", "KEPT_UNDER", "ANSWERED_UNDER"):
        monkeypatch.setattr(inv_machine, switches, dict.fromkeys(getattr(inv_machine, switches), True))
    root = Path(tempfile.mkdtemp(prefix=f"thoth-inv-regression-{backend}-"))
    root.chmod(0o755)
    attributes: dict[str, Any] = {"backend": backend, "root": root}
    if backend == "postgres":
        server = request.getfixturevalue("pg_server")
        attributes |= {"pg_server": server, "new_storage_url": staticmethod(lambda: fresh_database(server))}
    machine = type(f"Regression_{backend}", (inv_machine.HomeMachine,), attributes)()
    machine.start()
    return machine


@pytest.fixture
def sqlite_home(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The state machine on an embedded (SQLite) home."""
    machine = make_machine("sqlite", request, monkeypatch)
    yield machine
    machine.teardown()
    remove_root(machine.root)


@pytest.fixture
def postgres_home(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """The state machine on a home whose `[storage] url` is a fresh PostgreSQL database."""
    machine = make_machine("postgres", request, monkeypatch)
    yield machine
    machine.teardown()
    remove_root(machine.root)


def test_a_turn_killed_before_the_model_answers_is_kept(sqlite_home: Any) -> None:
    sqlite_home.killed_turn(peer="alice", thread="t1", agent="default", point="start")
    sqlite_home.promises()


def test_a_turn_killed_mid_stream_is_kept(sqlite_home: Any) -> None:
    sqlite_home.killed_turn(peer="alice", thread="t1", agent="default", point="mid-stream")
    sqlite_home.promises()


def test_a_turn_killed_after_the_last_word_is_kept(sqlite_home: Any) -> None:
    sqlite_home.killed_turn(peer="alice", thread="t1", agent="scout", point="last-word")
    sqlite_home.promises()


def test_a_turn_killed_after_the_last_word_is_kept_on_postgres(postgres_home: Any) -> None:
    postgres_home.killed_turn(peer="bob", thread="t2", agent="default", point="last-word")
    postgres_home.promises()


def rerun_killed_turn(machine: Any) -> None:
    """Answer the last (killed) message again with its turn id, as a Slack worker re-runs a dead one's message."""
    message = list(machine.world.ledger.messages.values())[-1]
    seen = machine.world.observe()  # the recovery writes it cut short first
    (turn_id,) = {e["turn_id"] for e in seen.sections["episodic"] if message.marker in e["user"]}
    args = {"peer": message.peer, "thread": message.thread, "agent": message.agent}
    answer = machine.world.call("turn", **args, text=f"Please note {message.marker} for me", turn_id=turn_id)
    message.shown, message.complete = answer["reply"], True  # the user now saw the whole reply


def test_a_turn_killed_mid_stream_then_re_run_with_its_turn_id_is_kept_whole_once(sqlite_home: Any) -> None:
    sqlite_home.killed_turn(peer="alice", thread="t1", agent="default", point="mid-stream")
    rerun_killed_turn(sqlite_home)
    sqlite_home.promises()


def test_a_turn_killed_mid_stream_then_re_run_with_its_turn_id_is_kept_whole_once_on_postgres(
    postgres_home: Any,
) -> None:
    postgres_home.killed_turn(peer="alice", thread="t1", agent="default", point="mid-stream")
    rerun_killed_turn(postgres_home)
    postgres_home.promises()


def test_a_turn_on_a_read_only_data_folder_is_kept(sqlite_home: Any) -> None:
    if not sqlite_home.world.mounted:
        pytest.skip("needs root and mount: the data folder is a tmpfs remounted read-only")
    sqlite_home.read_only_turn(peer="carol", thread="t3")
    sqlite_home.promises()


def test_concurrent_first_turns_share_one_session(sqlite_home: Any) -> None:
    sqlite_home.concurrent_first_turns(peer="alice", count=3)
    sqlite_home.promises()


def test_a_turn_on_a_full_disk_opens_no_second_session(sqlite_home: Any) -> None:
    sqlite_home.turn(peer="alice", thread="t1", agent="default")
    sqlite_home.disk_full_turn(peer="alice", thread="t1")
    sqlite_home.promises()


def test_a_turn_while_postgres_is_down_is_answered(postgres_home: Any) -> None:
    postgres_home.turn(peer="alice", thread="t1", agent="default")
    postgres_home.postgres_outage_turn(peer="alice", thread="t1")
    postgres_home.promises()


def test_forget_of_a_thread_leaves_nothing_in_the_identity_cache(sqlite_home: Any) -> None:
    sqlite_home.turn(peer="alice", thread="t1", agent="default")
    sqlite_home.turn(peer="alice", thread="t2", agent="default")
    sqlite_home.forget(peer="alice", thread="t1")
    sqlite_home.promises()


def test_forget_of_a_peer_with_the_ann_index_leaves_nothing_and_spares_the_other(sqlite_home: Any) -> None:
    for peer in ("alice", "bob", "alice", "bob"):
        sqlite_home.turn(peer=peer, thread="t1", agent="default")
    sqlite_home.promises()
    sqlite_home.forget(peer="alice", thread=None)
    assert any(m.vectors for m in sqlite_home.world.ledger.messages.values()), "no vector was captured to look for"
    sqlite_home.promises()


def test_turns_while_honcho_hangs_or_is_down_are_answered_and_kept(sqlite_home: Any) -> None:
    sqlite_home.honcho_fault_turn(peer="alice", thread="t1", mode="hang")
    sqlite_home.promises()
    sqlite_home.honcho_fault_turn(peer="bob", thread="t1", mode="down")
    sqlite_home.promises()


def test_an_approved_item_outlives_forget_nightly_and_bundles(sqlite_home: Any) -> None:
    sqlite_home.turn(peer="alice", thread="t1", agent="default")
    sqlite_home.turn(peer="bob", thread="t1", agent="default")
    sqlite_home.reap(agent="default")
    sqlite_home.promises()
    sqlite_home.decide(pick=0, approve=True)
    assert any(item.approved for item in sqlite_home.world.ledger.items.values()), "nothing was approved"
    sqlite_home.promises()
    for step in (
        lambda: sqlite_home.remember(peer="bob"),
        lambda: sqlite_home.nightly(agent="default"),
        lambda: sqlite_home.forget(peer="alice", thread=None),
        lambda: sqlite_home.forget(peer="bob", thread=None),
        sqlite_home.roundtrip_bundle,
    ):
        step()
        sqlite_home.promises()


def test_forget_after_an_import_with_the_ann_index_does_not_abort(sqlite_home: Any) -> None:
    sqlite_home.import_episodes(peer="alice", count=30)
    sqlite_home.promises()
    sqlite_home.forget(peer="alice", thread=None)
    sqlite_home.promises()


def test_forget_after_an_import_on_postgres_leaves_nothing_in_any_table(postgres_home: Any) -> None:
    postgres_home.import_episodes(peer="alice", count=30)
    postgres_home.turn(peer="bob", thread="t1", agent="default")
    postgres_home.promises()
    postgres_home.forget(peer="alice", thread=None)
    postgres_home.promises()
    postgres_home.rebuild_index()
    postgres_home.roundtrip_bundle()
    postgres_home.promises()


def test_a_stranger_can_neither_approve_nor_reject_another_peers_item(sqlite_home: Any) -> None:
    sqlite_home.turn(peer="alice", thread="t1", agent="default")
    sqlite_home.reap(agent="default")
    sqlite_home.promises()
    assert any(item.get("peer") == "alice" for item in sqlite_home.before.approvals), "nothing of alice's waits"
    for approve in (True, False):
        sqlite_home.stranger_decides(pick=0, actor="carol", approve=approve)
        sqlite_home.promises()
