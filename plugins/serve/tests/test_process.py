"""A real `thoth serve --port 0` process: one THOTH_URL line, the API over TCP with a token, SSE, events, MCP."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.request

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from thoth_serve.run import GRACE
from thoth_serve.testing import REPLY, make_home, sse_events

from thoth_core.testing import run_thoth

pytestmark = pytest.mark.slow
TOKEN = "test-token-8c1f"


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return make_home(tmp_path_factory.mktemp("serve"))


@pytest.fixture(scope="module")
def server(home, start_server):
    """One service for the module, with a token."""
    return start_server(home, token=TOKEN)


def test_it_prints_one_url_line_and_answers_health_with_the_token_only(server, home):
    assert len(server.lines) == 1 and server.lines[0].startswith("THOTH_URL=http://127.0.0.1:")
    status, body = server.request("GET", "/v1/health")
    assert status == 200 and body["status"] == "ok" and "serve" in body["plugins"]
    assert body["home"] == str(home / ".thoth")
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}):
        status, body = server.request("GET", "/v1/health", headers=headers)
        assert status == 401 and set(body) == {"error"} and "\n" not in body["error"]
    advertised = json.loads((home / ".thoth" / "run" / "service.json").read_text())
    assert advertised["url"] == server.url and advertised["token"] == TOKEN


def test_remember_recall_and_a_streamed_turn_over_tcp(server):
    status, body = server.request("POST", "/v1/peers/ada/memories", {"text": "I live in Lisbon"})
    assert status == 200, body
    status, body = server.request("GET", "/v1/peers/ada/recall?q=Lisbon&k=5")
    assert status == 200 and any("Lisbon" in hit["text"] for hit in body["hits"]), body
    assert all(hit["plugin"] and "why" in hit for hit in body["hits"])
    request = urllib.request.Request(
        server.url + "/v1/peers/ada/turns",
        data=json.dumps({"text": "hello", "thread": "tcp"}).encode(),
        headers={**server.headers(), "Content-Type": "application/json", "Accept": "text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.read().decode())
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) > 1 and "".join(deltas) == REPLY
    assert events[-1][0] == "done" and events[-1][1]["reply"] == REPLY


def test_events_stream_tells_of_a_turn_that_landed(server):
    seen: list[tuple[str, object]] = []
    ready = threading.Event()

    def listen() -> None:
        with httpx.stream("GET", server.url + "/v1/events", headers=server.headers(), timeout=30) as response:
            buffer = ""
            for text in response.iter_text():
                ready.set()
                buffer += text
                seen.extend(sse_events(buffer))
                if any(name == "turn" for name, _ in seen):
                    return
                buffer = buffer[buffer.rfind("\n\n") + 2 :] if "\n\n" in buffer else buffer
                seen.clear()

    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    assert ready.wait(10)
    status, body = server.request(
        "POST", "/v1/peers/bea/turns", {"text": "hi"}, headers={**server.headers(), "Accept": "application/json"}
    )
    assert status == 200 and body["reply"] == REPLY
    listener.join(20)
    turns = [data for name, data in seen if name == "turn"]
    assert turns and turns[0]["peer"] == "bea" and turns[0]["turn_id"] == body["turn_id"]


def test_mcp_at_slash_mcp_answers_initialize_and_a_tool(server):
    assert server.request("POST", "/v1/peers/mia/memories", {"text": "I live in Lisbon"})[0] == 200

    async def round_trip() -> tuple[str, set[str], str]:
        async with (
            httpx.AsyncClient(headers=server.headers(), timeout=30) as client,
            streamable_http_client(server.url + "/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            tools = {tool.name for tool in (await session.list_tools()).tools}
            recalled = await session.call_tool("recall", {"query": "Lisbon", "peer": "mia"})
            return init.server_info.name, tools, recalled.content[0].text

    name, tools, recalled = asyncio.run(round_trip())
    assert name and {"recall", "remember", "forget", "context"} <= tools
    assert "Lisbon" in recalled


def test_doctor_says_the_service_answers(server, home):
    result = run_thoth("doctor", cwd=home, env={"THOTH_CONFIG": str(home / "thoth.toml"), "THOTH_HOME": None})
    line = next(line for line in result.stdout.splitlines() if "service:" in line)
    assert line.startswith("ok ") and server.url in line and "answers" in line, result.stdout


def test_a_non_loopback_bind_without_a_token_is_refused_in_one_line(home):
    result = run_thoth("serve", "--host", "0.0.0.0", "--port", "0", cwd=home, env={"THOTH_TOKEN": None})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "not a loopback address" in result.stderr
    assert "THOTH_TOKEN" in result.stderr


def test_several_workers_on_sqlite_are_refused_in_one_line(home):
    result = run_thoth("serve", "--workers", "2", "--port", "0", cwd=home, env={"THOTH_STORAGE_URL": None})
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "--workers 2" in result.stderr and "PostgreSQL" in result.stderr


def test_sigterm_stops_it_cleanly_and_withdraws_the_advertisement(tmp_path, start_server):
    home = make_home(tmp_path)  # its own: the module's service keeps advertising its home
    other = start_server(home, "--peer", "cid", token=TOKEN)
    assert other.request("GET", "/v1/peers/ada/recall?q=x")[0] == 403
    with httpx.stream("GET", other.url + "/v1/events", headers=other.headers(), timeout=30) as events:
        chunks = events.iter_text()
        assert "connected" in next(chunks)  # a live stream is open: it must not hold the shutdown up
        started = time.monotonic()
        assert other.stop() == 0, other.log()
        took = time.monotonic() - started
        assert "".join(chunks) == ""  # the stream ended
    assert took < GRACE and "Traceback" not in other.log(), other.log()
    assert not (home / ".thoth" / "run" / "service.json").exists()


def test_a_runtime_that_cannot_start_is_one_line_not_a_traceback(tmp_path):
    broken = make_home(tmp_path, extra='\n[storage]\nurl = "mysql://nope"\n')
    result = run_thoth("serve", "--port", "0", cwd=broken, env={"THOTH_CONFIG": str(broken / "thoth.toml")})
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert result.stderr.count("\n") <= 1 and "storage.url: expected a postgresql:// URL" in result.stderr
    assert "Traceback" not in result.stderr
