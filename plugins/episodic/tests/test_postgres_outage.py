"""The PostgreSQL backend in an outage: StoreDown at once (no 30 s pool wait), its tables made once it is back."""

from __future__ import annotations

import time
from typing import Any

import pytest
from thoth_episodic.contract import episode
from thoth_episodic.postgres_store import SCHEMA, PostgresStore

from thoth_core.database import CONNECT_SECONDS, POOL_WAIT_SECONDS, StoreDown
from thoth_core.testing.postgres import outage

FAST = CONNECT_SECONDS + POOL_WAIT_SECONDS + 1.0  # one pool wait and one fresh connection, not POOL_TIMEOUT


def _eventually(action: Any, seconds: float = 10.0) -> Any:
    """`action()` once the circuit's probe has found the server up."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return action()
        except StoreDown:
            assert time.monotonic() < deadline, "the server did not come back"
            time.sleep(0.05)


def test_a_store_opened_in_an_outage_fails_fast_then_makes_its_tables_once_the_server_answers(
    storage_url: str, pg_server: Any
) -> None:
    with outage(pg_server):
        started = time.monotonic()
        store = PostgresStore(storage_url, schema=SCHEMA, ann="exact")
        with pytest.raises(StoreDown):
            store.count()
        assert time.monotonic() - started < FAST
    try:
        assert _eventually(store.count) == 0
        assert [e.user for e in store.add([episode("kept after the outage")])] == ["kept after the outage"]
        assert store.count() == 1
    finally:
        store.close()


def test_an_outage_under_an_open_store_fails_its_statements_fast_and_they_work_again_after(
    storage_url: str, pg_server: Any
) -> None:
    store = PostgresStore(storage_url, schema=SCHEMA, ann="exact")
    try:
        store.add([episode("before")])
        with outage(pg_server):
            started = time.monotonic()
            with pytest.raises(StoreDown):
                for _ in range(3):
                    store.count()  # the first may find a dead pooled connection; the circuit then says down
            assert time.monotonic() - started < FAST
            started = time.monotonic()
            with pytest.raises(StoreDown):
                store.add([episode("during")])
            assert time.monotonic() - started < POOL_WAIT_SECONDS  # the circuit answers, no wait for the pool
        assert _eventually(store.count) == 1
    finally:
        store.close()
