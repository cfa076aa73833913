"""The web inspector's pages in-process: httpx over ASGI, a real runtime with the real layers."""

from __future__ import annotations

import re
from html import unescape

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from thoth_procedural import drafts
from thoth_serve.app import create_app
from thoth_serve.inspector import csrf, gather, plots
from thoth_serve.inspector.diffs import diff_lines
from thoth_serve.options import ServeOptions
from thoth_serve.testing import plugins

OWNER = "ann"
SCRIPT = "<script>alert('x')</script>"
PLUGINS = plugins()  # the installed layers: working, identity, procedural, episodic


@pytest.fixture
async def inspector(thoth_env, make_runtime):
    """A client of the service's app on a runtime with the installed layers; `ann` owns the home (she decides
    approvals)."""
    runtime = make_runtime(PLUGINS, config={"thoth": {"owner": OWNER}}, replies=[{"reply": "Noted, Ann."}])
    app = create_app(runtime=runtime)  # the service's app: its auth and Host rules, the inspector registered
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        client.runtime = runtime  # type: ignore[attr-defined]
        yield client
    await runtime.aclose()


async def page(client: httpx.AsyncClient, path: str, **params: str) -> str:
    """A page's HTML (status 200), for peer ann unless params say otherwise."""
    response = await client.get(path, params={"peer": OWNER, **params})
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def token(html: str) -> str:
    """The form token a page carries."""
    found = re.search(r'name="csrf" value="([^"]+)"', html)
    assert found, "no form token on the page"
    return found.group(1)


def needs_records(client: httpx.AsyncClient, plugin: str) -> None:
    """Skip while a layer does not answer `memory_records` yet (issue 38: each layer's records.py lands in turn)."""
    if plugin not in client.runtime.pm.implementers("memory_records"):  # type: ignore[attr-defined]
        pytest.skip(f"the {plugin} layer does not answer memory_records yet")


async def remember(client: httpx.AsyncClient, text: str) -> None:
    await client.runtime.turn(f"/remember {text}", peer=OWNER, thread="t1")  # type: ignore[attr-defined]


async def test_every_view_renders_for_an_empty_home(inspector):
    for path in ("/", "/sessions", "/identity", "/episodes", "/files", "/approvals", "/forget", "/search"):
        html = await page(inspector, path)
        assert "<main" in html and 'aria-current="page"' in html or path == "/search", path
    assert "Nothing is waiting for approval." in await page(inspector, "/approvals")
    css = await inspector.get("/static/inspector/inspector.css")
    script = await inspector.get("/static/inspector/inspector.js")
    assert css.status_code == script.status_code == 200
    assert "EventSource" in script.text and "max-width: 480px" in css.text


async def test_a_fact_holding_a_script_renders_as_text(inspector):
    await remember(inspector, f"my motto is {SCRIPT}")
    for path in ("/", "/identity"):
        html = await page(inspector, path)
        assert SCRIPT not in html  # never markup
        assert "&lt;script&gt;alert(" in html  # but shown, as text
    note = next(r for r in await inspector.runtime.records(peer=OWNER, layer="identity") if "motto" in r["text"])
    html = await page(inspector, f"/records/{note['id']}")
    assert SCRIPT not in html and "&lt;script&gt;" in html
    hits = await page(inspector, "/search", q="motto")
    assert SCRIPT not in hits and "motto" in hits


async def test_every_recall_hit_link_opens_its_record(inspector):
    await remember(inspector, "I live in Lisbon")
    await inspector.runtime.turn("Lisbon has good trams", peer=OWNER, thread="t1")
    await inspector.runtime.drain()
    html = await page(inspector, "/search", q="Lisbon")
    assert 'dl class="why"' in html
    links = re.findall(r'href="(/records/[^"]+)"', html)
    assert links, "no hit links to its record"
    for link in links:
        url = httpx.URL(unescape(link))
        assert (await inspector.get(url.path, params=dict(url.params))).status_code == 200, link


async def test_a_bad_peer_name_is_one_line_not_a_page_of_it(inspector):
    response = await inspector.get("/", params={"peer": "<b>x</b>"})
    assert response.status_code == 400
    assert "<b>x</b>" not in response.text and "is not a valid name" in unescape(response.text)


async def test_sessions_show_the_transcript(inspector):
    needs_records(inspector, "working")
    await inspector.runtime.turn("hello there, I am Ann", peer=OWNER, thread="t1")
    await inspector.runtime.drain()
    html = await page(inspector, "/sessions")
    assert "hello there, I am Ann" in html and "Noted, Ann." in html


async def test_older_sessions_are_a_link_away(inspector, monkeypatch):
    monkeypatch.setattr(gather, "PAGE_SIZE", 2)
    for thread in ("t1", "t2", "t3"):
        await inspector.runtime.turn(f"hello in {thread}", peer=OWNER, thread=thread)
    await inspector.runtime.drain()
    html = await page(inspector, "/sessions")
    assert "hello in t3" in html and "hello in t2" in html and "hello in t1" not in html
    older = httpx.URL(unescape(re.search(r'href="([^"]+)" rel="next"', html).group(1)))
    html = await page(inspector, older.path, **dict(older.params))
    assert "hello in t1" in html and "hello in t3" not in html and 'rel="next"' not in html
    bad = await inspector.get("/sessions", params={"peer": OWNER, "before": "yesterday"})
    assert bad.status_code == 400 and "before: expected unix seconds" in bad.text


async def test_a_pinned_server_shows_its_peer_only(thoth_env, make_runtime):
    runtime = make_runtime(PLUGINS, config={"thoth": {"owner": OWNER}})
    app = create_app(runtime=runtime, options=ServeOptions(peer="bob"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765") as client:
        html = (await client.get("/identity")).text
        assert "Identity of bob" in html and '<option value="bob">' in html and f'value="{OWNER}"' not in html
        refused = await client.get("/identity", params={"peer": OWNER})
        assert refused.status_code == 400 and "pinned to peer 'bob'" in unescape(refused.text)
    await runtime.aclose()


async def test_identity_shows_facts_their_history_and_the_entity_graph(inspector):
    await remember(inspector, "I live in Lisbon")
    await remember(inspector, "my sister is Maria")
    html = await page(inspector, "/identity")
    graph_svg = html[html.index('<svg class="graph"'):html.index("</svg>", html.index('<svg class="graph"'))]
    assert ">ann</text>" in graph_svg and ">Maria</text>" in graph_svg and ">sister</text>" in graph_svg
    assert re.search(r">ann</a> &rarr;\s*<a class=\"relation\" href=\"/records/f\d+[^>]*>sister</a>", html)
    held = await inspector.runtime.records(peer=OWNER, layer="identity", kind="fact")
    fact = next(r for r in held if "Lisbon" in r["text"])
    html = await page(inspector, f"/records/{fact['id']}")
    assert "No earlier versions." in html
    response = await inspector.post(
        f"/records/{fact['id']}",
        params={"peer": OWNER},
        data={"csrf": token(html), "action": "edit", "text": "I live in Porto"},
    )
    assert response.status_code == 303, response.text
    location = httpx.URL(response.headers["location"])
    html = await page(inspector, location.path, **dict(location.params))
    assert "saved" in html and "Porto" in html.split('id="history-h"')[0]
    history = html.split('id="history-h"')[1]
    assert "Lisbon" in history and 'class="remove"' in history and 'class="add"' in history


async def test_a_form_without_the_token_or_from_another_origin_changes_nothing(inspector):
    await remember(inspector, "I like tea")
    record = (await inspector.runtime.records(peer=OWNER, layer="identity"))[0]
    form = token(await page(inspector, "/forget"))
    forged = await inspector.post(f"/records/{record['id']}", params={"peer": OWNER}, data={"action": "delete"})
    assert forged.status_code == 403 and "token" in forged.text
    foreign = await inspector.post(
        "/forget", params={"peer": OWNER}, data={"csrf": form, "confirm": "yes"}, headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403 and "evil.example" in foreign.text
    assert await inspector.runtime.get_record(record_id=record["id"], peer=OWNER) is not None


async def test_delete_a_record_round_trip(inspector):
    await remember(inspector, "I like green tea")
    record = (await inspector.runtime.records(peer=OWNER, layer="identity"))[0]
    form = token(await page(inspector, f"/records/{record['id']}"))
    response = await inspector.post(
        f"/records/{record['id']}", params={"peer": OWNER}, data={"csrf": form, "action": "delete", "back": "/identity"}
    )
    assert response.status_code == 303 and response.headers["location"].startswith("/identity?")
    assert await inspector.runtime.get_record(record_id=record["id"], peer=OWNER) is None


async def draft_skill(runtime, body: str = "Say the steps out loud.") -> str:
    path = drafts.write_draft(
        runtime, name="brew-tea", description="how to brew tea", body=body,
        source={"workspace": "default", "peer": OWNER, "thread": "t1"}, flags=[],
    )
    return f"skill:{path.name}"


async def test_approve_a_draft_from_its_diff(inspector):
    item = await draft_skill(inspector.runtime, body=f"Boil water. {SCRIPT}")
    html = await page(inspector, "/approvals")
    assert item in html and 'class="add"' in html and "+Boil water." in unescape(html)
    assert SCRIPT not in html
    assert ">Boil water. &lt;script&gt;" in html  # the edit box holds the instructions, without the front matter
    steps = "Boil water. Steep 3 minutes."
    edited = await inspector.post(
        f"/approvals/{item}", params={"peer": OWNER}, data={"csrf": token(html), "decision": "edit", "text": steps}
    )
    assert edited.status_code == 303
    html = (await inspector.get(edited.headers["location"])).text
    assert "still pending" in html and f"+{steps}" in unescape(html)
    response = await inspector.post(f"/approvals/{item}", params={"peer": OWNER},
                                    data={"csrf": token(html), "decision": "approve"})
    assert response.status_code == 303
    after = await inspector.get(response.headers["location"])
    assert "approved" in after.text.lower() or "installed" in after.text.lower(), after.text
    assert item not in after.text.split("</main>")[0].split('role="status"')[-1]
    assert "Nothing is waiting for approval." in after.text
    needs_records(inspector, "procedural")
    assert "brew-tea" in await page(inspector, "/files")


async def test_reject_and_a_refused_decision_say_so(inspector):
    item = await draft_skill(inspector.runtime)
    html = await page(inspector, "/approvals", peer="eve")  # not the owner, not whom it is about: sees nothing
    assert item not in html
    form = token(await page(inspector, "/forget", peer="eve"))  # a form of hers, on another page
    refused = await inspector.post(f"/approvals/{item}", params={"peer": "eve"},
                                   data={"csrf": form, "decision": "approve"})
    shown = await inspector.get(refused.headers["location"])
    assert 'class="note error"' in shown.text
    assert item in [i["id"] for i in await inspector.runtime.approvals(actor=OWNER)]
    html = await page(inspector, "/approvals")
    response = await inspector.post(f"/approvals/{item}", params={"peer": OWNER},
                                    data={"csrf": token(html), "decision": "reject", "reason": "not now"})
    assert "rejected" in (await inspector.get(response.headers["location"])).text
    assert await inspector.runtime.approvals(actor=OWNER) == []


async def test_forget_shows_its_receipt(inspector):
    await remember(inspector, "I like coffee")
    await inspector.runtime.drain()
    form = token(await page(inspector, "/forget"))
    unconfirmed = await inspector.post("/forget", params={"peer": OWNER}, data={"csrf": form})
    assert unconfirmed.status_code == 400
    assert await inspector.runtime.records(peer=OWNER, layer="identity")
    response = await inspector.post("/forget", params={"peer": OWNER}, data={"csrf": form, "confirm": "yes"})
    assert response.status_code == 303
    receipt = (await inspector.get(response.headers["location"])).text
    assert "Receipt" in receipt and "identity" in receipt
    assert await inspector.runtime.records(peer=OWNER, layer="identity") == []


async def test_overview_plots_growth_from_record_times(inspector):
    for text in ("I like tea", "I live in Lisbon", "my dog is Rex"):
        await remember(inspector, text)
    html = await page(inspector, "/")
    held = len(await inspector.runtime.records(peer=OWNER, limit=500))
    assert held >= 3 and html.count('<svg class="plot"') == 1
    assert f"Memory growth (records): {held} samples, latest {held} records" in html
    assert "Recall latency: no samples yet." in html
    assert (await inspector.get(f"/v1/peers/{OWNER}/recall", params={"q": "tea"})).status_code == 200
    await page(inspector, "/search", q="Lisbon")  # the inspector's own recalls are timed too
    html = await page(inspector, "/")
    assert html.count('<svg class="plot"') == 2 and "Recall latency: 2 samples" in html


@given(st.lists(st.floats(min_value=1, max_value=4e9), max_size=50))
def test_growth_counts_every_record_once_in_time_order(times):
    points = plots.cumulative(times)
    assert [p[1] for p in points] == list(range(1, len(times) + 1))
    assert [p[0] for p in points] == sorted(times)


@given(st.lists(st.tuples(st.floats(0, 4e9), st.floats(0, 1e6)), min_size=1, max_size=40))
def test_plotted_points_stay_inside_the_box(points):
    for x, y in plots.scale(points):
        assert plots.PAD <= x <= plots.WIDTH - plots.PAD
        assert plots.PAD <= y <= plots.HEIGHT - plots.PAD


@given(st.text(max_size=40), st.text(max_size=40))
def test_plot_and_graph_labels_are_escaped(title, name):
    for markup in (plots.line_plot([(1.0, 2.0)], title=title, unit=name), plots.graph([name], [], title=title)):
        text = re.sub(r"<[a-z/][^<>]*>", "", str(markup))  # the drawing's own tags gone: no markup is left
        assert "<" not in text and ">" not in text


LINES = st.lists(st.text(alphabet="ab ", max_size=6), max_size=8)


@given(LINES, LINES)
def test_a_diff_is_empty_exactly_when_nothing_changes(before, after):
    old, new = "\n".join(before), "\n".join(after)
    assert (diff_lines(old, new) == []) == (old.splitlines() == new.splitlines())


def test_refusal_needs_the_cookie_token_and_a_same_origin():
    def request(headers: dict[str, str]):
        from starlette.requests import Request

        raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        return Request({"type": "http", "method": "POST", "headers": raw, "path": "/", "query_string": b""})

    good = "t" * 40
    same = {"host": "127.0.0.1:9", "cookie": f"{csrf.COOKIE}={good}"}
    assert csrf.refusal(request(same), good) is None
    assert csrf.refusal(request({**same, "origin": "http://127.0.0.1:9"}), good) is None
    assert "not from this server" in csrf.refusal(request({**same, "origin": "http://127.0.0.1:10"}), good)
    assert "token" in csrf.refusal(request(same), "t" * 39 + "u")
    assert "token" in csrf.refusal(request({"host": "127.0.0.1:9"}), good)


def test_the_docs_show_every_view():
    from pathlib import Path

    from thoth_serve.inspector.view import NAV

    docs = Path(__file__).resolve().parents[3] / "docs"
    text = (docs / "inspector.md").read_text()
    shown = re.findall(r"\]\((img/inspector-[a-z-]+\.png)\)", text)
    assert all((docs / image).is_file() for image in shown), "docs/inspector.md shows a screenshot that is missing"
    names = {path.strip("/") or "overview" for path, _ in NAV}
    assert names <= {image.removeprefix("img/inspector-").removesuffix(".png") for image in shown}
