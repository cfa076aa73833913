"""The REST API in-process (httpx over ASGI, a test runtime with the real layers): answers, errors, auth, pins."""

from __future__ import annotations

import pytest
from thoth_serve.app import validation_line
from thoth_serve.testing import REPLY, client_of, sse_events

from thoth_core import hookimpl


async def test_health_and_the_openapi_document(api):
    health = (await api.get("/v1/health")).json()
    assert health["status"] == "ok" and "identity" in health["plugins"] and health["peer"] is None
    document = (await api.get("/openapi.json")).json()
    paths = document["paths"]
    for path in ("/v1/peers/{peer}/memories", "/v1/peers/{peer}/recall", "/v1/peers/{peer}/turns", "/v1/approvals"):
        assert path in paths
    assert "TextIn" in document["components"]["schemas"] and "RecallOut" in document["components"]["schemas"]


async def test_remember_then_recall_gives_the_hit_with_why_and_plugin(api):
    answer = await api.post("/v1/peers/ada/memories", json={"text": "my name is Ada"})
    assert answer.status_code == 200 and "Ada" in answer.json()["answer"]
    hits = (await api.get("/v1/peers/ada/recall", params={"q": "name", "k": 5})).json()["hits"]
    assert any("Ada" in hit["text"] and hit["plugin"] == "identity" and hit["why"] for hit in hits)
    assert (await api.get("/v1/peers/bob/recall", params={"q": "name"})).json()["hits"] == []  # never another's


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "says"),
    [
        ("post", "/v1/peers/ada/memories", {}, 422, "text: Field required"),
        ("post", "/v1/peers/ada/memories", {"text": ""}, 422, "text: String should have at least 1 character"),
        ("get", "/v1/peers/ada/recall?q=x&k=0", None, 422, "query.k: Input should be greater than or equal to 1"),
        ("get", "/v1/peers/ada/recall", None, 422, "query.q: Field required"),
        ("get", "/v1/peers/has%20space/recall?q=x", None, 400, "peer: 'has space' is not a valid name"),
        ("get", "/v1/peers/-rf/recall?q=x", None, 400, "peer: '-rf' is not a valid name"),
        ("post", "/v1/peers/ada/context", {"message": "hi", "thread": "a b"}, 400, "thread: 'a b' is not a valid"),
        ("post", "/v1/peers/ada/forget", {}, 400, "confirm: must be true to forget peer ada"),
        ("post", "/v1/approvals/nope", {"decision": "approve", "peer": "ann"}, 404, "no pending item 'nope'"),
        ("post", "/v1/approvals/nope", {"decision": "maybe", "peer": "ann"}, 422, "decision: Input should be"),
        ("get", "/v1/nothing-here", None, 404, "Not Found"),
    ],
)
async def test_bad_input_is_one_line_naming_the_key(api, method, path, body, status, says):
    response = await getattr(api, method)(path, **({"json": body} if body is not None else {}))
    assert response.status_code == status, response.text
    error = response.json()
    assert set(error) == {"error"} and "\n" not in error["error"] and says in error["error"], error


def test_a_validation_line_counts_the_other_problems():
    errors = [{"loc": ("body", "text"), "msg": "Field required"}, {"loc": ("query", "k"), "msg": "bad"}]
    assert validation_line(errors) == "text: Field required; and 1 more"


async def test_the_token_is_required_on_every_route_and_login_sets_the_cookie(runtime):
    async with client_of(runtime, token="s3cret") as api:
        for path in ("/v1/health", "/openapi.json", "/v1/peers/ada/recall?q=x", "/mcp", "/"):
            response = await api.get(path)
            assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer", path
        assert (await api.get("/v1/health", headers={"Authorization": "Bearer s3cre"})).status_code == 401
        assert (await api.get("/v1/health", headers={"Authorization": "Bearer s3cret"})).status_code == 200
        assert (await api.get("/login", params={"token": "wrong"})).status_code == 401
        login = await api.get("/login", params={"token": "s3cret", "next": "//evil.example/"})
        assert login.status_code == 303 and login.headers["location"] == "/"
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert (await api.get("/v1/health")).status_code == 200  # the client keeps the cookie


async def test_a_loopback_service_refuses_other_host_names(api):
    assert (await api.get("/v1/health", headers={"Host": "localhost:8766"})).status_code == 200
    refused = await api.get("/v1/health", headers={"Host": "attacker.example"})
    assert refused.status_code == 403 and "attacker.example" in refused.json()["error"]


async def test_cors_is_closed_unless_an_origin_is_allowed(runtime, api):
    asked = {"Origin": "https://app.example", "Access-Control-Request-Method": "GET"}
    closed = await api.options("/v1/health", headers=asked)
    assert "access-control-allow-origin" not in closed.headers
    async with client_of(runtime, cors_origins=("https://app.example",)) as open_api:
        allowed = await open_api.options("/v1/health", headers=asked)
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        other = await open_api.options("/v1/health", headers={**asked, "Origin": "https://other.example"})
        assert "access-control-allow-origin" not in other.headers


async def test_a_pinned_service_refuses_other_peers_and_home_wide_bundles(runtime):
    async with client_of(runtime, peer="ada") as api:
        assert (await api.get("/v1/peers/ada/recall", params={"q": "x"})).status_code == 200
        refused = await api.get("/v1/peers/bob/recall", params={"q": "x"})
        assert refused.status_code == 403
        assert refused.json() == {"error": "peer: 'bob' refused; this server is pinned to peer 'ada' (--peer)"}
        assert (await api.get("/v1/bundle")).status_code == 403
        assert (await api.get("/v1/health")).json()["peer"] == "ada"


class Writes:
    """A plugin that records each turn its post_turn_write is given."""

    def __init__(self) -> None:
        self.turns: list[tuple[str, str, str, str]] = []

    @hookimpl
    def post_turn_write(self, turn, reply, session) -> None:
        self.turns.append((turn.peer, turn.thread, turn.text, reply.text))


async def test_sse_deltas_concatenate_to_the_reply_and_the_turn_is_recorded_like_a_cli_turn(runtime, api):
    writes = Writes()
    runtime.register(writes, name="writes")
    response = await api.post("/v1/peers/ada/turns", json={"text": "hello", "thread": "web"})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert len(deltas) == len(REPLY.split()) and "".join(deltas) == REPLY
    name, done = events[-1]
    assert name == "done" and done["reply"] == REPLY and done["model"] == "replay" and not done["cut_short"]
    cli = await runtime.turn("hello", peer="ada", thread="cli")  # what `thoth ask` runs
    await runtime.drain()
    assert writes.turns == [("ada", "web", "hello", REPLY), ("ada", "cli", "hello", cli.reply.text)]
    assert runtime.unsaved == [] and runtime.journal.pending() == []
    web = await runtime.session(peer="ada", thread="web")
    assert [(m.role, m.content) for m in web.history] == [("user", "hello"), ("assistant", REPLY)]


async def test_a_json_turn_and_a_slash_command_through_the_api(api):
    answer = await api.post("/v1/peers/ada/turns", json={"text": "hi"}, headers={"Accept": "application/json"})
    assert answer.status_code == 200 and answer.json()["reply"] == REPLY and answer.json()["turn_id"]
    command = await api.post("/v1/peers/ada/turns", json={"text": "/remember I work as a potter"})
    events = sse_events(command.text)
    assert [name for name, _ in events] == ["done"] and "potter" in events[0][1]["reply"]
    for accept in ("application/json", "text/event-stream"):  # refused before anything is kept: one error line
        bad = await api.post("/v1/peers/ada/turns", json={"text": "a\u0000b"}, headers={"Accept": accept})
        assert bad.status_code == 400 and "\n" not in bad.json()["error"] and "NUL" in bad.json()["error"], bad.text


async def test_context_is_what_thoth_context_json_gives(api):
    await api.post("/v1/peers/ada/memories", json={"text": "I live in Oslo"})
    found = (await api.post("/v1/peers/ada/context", json={"message": "where do I live?"})).json()
    assert found["tokens"] <= found["budget"] and found["blocks"]
    assert any("Oslo" in block["text"] and block["tokens"] > 0 for block in found["blocks"])
    assert all(block["text"] in found["system"] for block in found["blocks"])  # the prompt `thoth context` prints
    assert {call["plugin"] for call in found["calls"]} >= {"identity", "procedural"}


async def test_forget_with_confirm_gives_the_receipt(api):
    await api.post("/v1/peers/ada/memories", json={"text": "my name is Ada"})
    receipt = (await api.post("/v1/peers/ada/forget", json={"confirm": True})).json()
    assert receipt["peer"] == "ada" and receipt["receipt"]["identity"]
    assert (await api.get("/v1/peers/ada/recall", params={"q": "Ada"})).json()["hits"] == []


async def test_metrics_count_and_time_what_was_asked(api):
    await api.get("/v1/peers/ada/recall", params={"q": "anything"})
    await api.post("/v1/peers/ada/context", json={"message": "hi"})
    report = (await api.get("/v1/metrics", params={"peer": "ada"})).json()
    assert report["counts"]["recall"] == 1 and report["counts"]["context"] == 1
    assert report["latency"]["recall"]["n"] == 1 and report["latency"]["recall"]["median_ms"] > 0
    assert [sample["kind"] for sample in report["samples"]] == ["recall", "context"]
    assert {layer["plugin"] for layer in report["layers"]} >= {"identity"}


async def test_approvals_list_is_the_policys(api):
    listed = await api.get("/v1/approvals", params={"peer": "ann"})
    assert listed.status_code == 200 and listed.json() == {"items": []}
    assert (await api.get("/v1/approvals")).status_code == 400  # whose view: a peer is needed


async def test_a_bundle_exported_through_the_api_imports_into_a_fresh_home(api, tmp_path, make_test_home):
    await api.post("/v1/peers/ada/memories", json={"text": "I live in Bergen"})
    exported = await api.get("/v1/bundle")
    assert exported.status_code == 200 and exported.headers["content-type"] == "application/gzip"
    async with make_test_home() as fresh:
        empty = await fresh.post("/v1/bundle", content=b"")
        assert empty.status_code == 400 and "empty" in empty.json()["error"]
        imported = await fresh.post("/v1/bundle", content=exported.content)
        assert imported.status_code == 200, imported.text
        assert imported.json()["added"]["identity"]
        hits = (await fresh.get("/v1/peers/ada/recall", params={"q": "Bergen"})).json()["hits"]
        assert any("Bergen" in hit["text"] for hit in hits)
        again = await fresh.post("/v1/bundle", content=exported.content)
        assert again.status_code == 400  # not fresh any more: --merge is needed


@pytest.fixture
def make_test_home(tmp_path, monkeypatch):
    """Factory: a client of a second service over a fresh runtime in its own home."""
    from contextlib import asynccontextmanager

    from thoth_serve.testing import plugins

    from thoth_core.testing import make_test_runtime

    @asynccontextmanager
    async def make():
        home = tmp_path / "second-home"
        home.mkdir()
        monkeypatch.setenv("THOTH_HOME", str(home))
        runtime = make_test_runtime(home, plugins(), replies=[{"reply": REPLY}])
        try:
            async with client_of(runtime) as client:
                yield client
        finally:
            await runtime.aclose()

    return make




class FullDisk:
    @hookimpl
    def post_turn_write(self, turn):
        raise OSError(28, "No space left on device")


async def test_a_turn_asked_to_say_whether_it_was_saved_names_the_layer_that_could_not(runtime, api):
    turn = {"text": "keep this", "thread": "web", "saved": True}
    events = sse_events((await api.post("/v1/peers/ada/turns", json=turn)).text)
    assert [name for name, _ in events][-2:] == ["done", "saved"] and events[-1][1] == {"failed": {}, "message": None}
    runtime.register(FullDisk(), name="full-disk")
    events = sse_events((await api.post("/v1/peers/ada/turns", json=turn)).text)
    name, saved = events[-1]
    assert name == "saved" and list(saved["failed"]) == ["full-disk"]
    assert saved["message"].startswith("Not saved yet: full-disk (OSError: [Errno 28] No space left on device)")
    answer = (await api.post("/v1/peers/ada/turns", json=turn, headers={"Accept": "application/json"})).json()
    assert answer["reply"] == REPLY and answer["not_saved"] == saved["message"]
    plain = await api.post("/v1/peers/ada/turns", json={"text": "hi"}, headers={"Accept": "application/json"})
    assert plain.json()["not_saved"] is None  # not asked: not waited for
