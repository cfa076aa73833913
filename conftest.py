"""The suite's `slow` marker, set by fixture: tests that start PostgreSQL or Redis, or run on their PostgreSQL side.

Files whose tests spawn `thoth` processes or run long Hypothesis machines say `pytestmark = pytest.mark.slow`.
`scripts/dev test -m "not slow"` runs the quick part; `scripts/dev test` (CI) runs everything.
"""

from __future__ import annotations

import pytest

SERVER_FIXTURES = frozenset({"pg_server", "storage_url", "pg_dsn", "redis_server"})
SERVER_PARAMS = frozenset({"postgres", "redis"})


def starts_a_server(item: pytest.Item) -> bool:
    """True when the test uses a database server fixture, or is the PostgreSQL or Redis case of a parametrized test."""
    if SERVER_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    callspec = getattr(item, "callspec", None)
    params = callspec.params.values() if callspec is not None else ()
    return any(isinstance(value, str) and value in SERVER_PARAMS for value in params)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that start a database server `slow`."""
    for item in items:
        if starts_a_server(item):
            item.add_marker(pytest.mark.slow)
