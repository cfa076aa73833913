"""Fixtures of the service's tests: an in-process app over a test runtime, and real `thoth serve` processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from thoth_serve.testing import REPLY, Server, client_of, plugins

from thoth_core import Runtime


@pytest.fixture
def runtime(thoth_env: Path, make_runtime: Any) -> Runtime:
    """A runtime with the layers and the replay model (it streams REPLY word by word)."""
    import thoth_serve.plugin

    for layer in ("working", "identity", "procedural"):
        pytest.importorskip(f"thoth_{layer}", reason="the API is tested over the layers that answer it")

    rt: Runtime = make_runtime(
        {**plugins(), "serve": thoth_serve.plugin}, config={"thoth": {"owner": "ann"}}, replies=[{"reply": REPLY}]
    )
    return rt


@pytest.fixture
async def api(runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the service (no token, not pinned) over `runtime`."""
    async with client_of(runtime) as client:
        yield client


@pytest.fixture(scope="module")
def start_server() -> Iterator[Any]:
    """Factory: `start_server(home, *args, token=...)`; every server it started is stopped at the end."""
    started: list[Server] = []

    def start(home: Path, *args: str, **kwargs: Any) -> Server:
        started.append(Server(home, *args, **kwargs))
        return started[-1]

    try:
        yield start
    finally:
        for server in started:
            server.stop()
