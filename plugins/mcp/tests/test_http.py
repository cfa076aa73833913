"""`thoth mcp --http`: streamable HTTP on 127.0.0.1 answers the `mcp` SDK's client, and stops cleanly."""

from __future__ import annotations

import asyncio

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def round_trip(url: str) -> tuple[set[str], str, str]:
    async with streamable_http_client(url) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        remembered = await session.call_tool("remember", {"text": "I work as a beekeeper"})
        refused = await session.call_tool("recall", {"query": "beekeeper", "peer": "bob"})
        return tools, remembered.content[0].text, refused.content[0].text if refused.is_error else "not refused"


@pytest.fixture(scope="module")
def http_server(start_http_server):
    return start_http_server("--peer", "dora")


def test_streamable_http_on_loopback_answers_a_client(http_server):
    tools, remembered, refused = asyncio.run(round_trip(http_server.url))
    assert {"recall", "remember", "forget", "context"} <= tools
    assert "beekeeper" in remembered
    assert refused == "recall: peer: 'bob' refused; this server is pinned to peer 'dora' (--peer)"
    assert "warning" not in http_server.log_path.read_text()  # bound to 127.0.0.1: no exposure warning


def test_the_http_server_stops_on_sigterm_after_ending_its_sessions(start_http_server):
    server = start_http_server()
    assert server.stop() == 0, server.log_path.read_text()
