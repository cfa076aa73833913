"""The inspector's pages: one GET view per layer, form posts that redirect back (post-redirect-get)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from thoth_core.errors import ThothError
from thoth_core.scope import valid_name

from . import csrf, gather
from .diffs import diff_lines
from .notes import notes_of
from .plots import graph, line_plot
from .view import NAV, Who, render, who

STATIC = "/static/inspector"
MAX_TEXT = 20_000
PAGES = {path for path, _ in NAV}  # where a delete may send the browser back to


def runtime_of(request: Request) -> Any:
    """The service's runtime."""
    return request.app.state.runtime


def back(request: Request, path: str, person: Who, **note: Any) -> RedirectResponse:
    """Redirect (303) to a page of the same peer, with a note of what happened."""
    key = notes_of(request).put(**note)
    return RedirectResponse(path + person.query(note=key), status_code=303)


def announce(request: Request, event: str, person: Who, **data: Any) -> None:
    """Tell the service's /v1/events subscribers (other tabs, other clients) what a form changed."""
    events = getattr(getattr(request.app.state, "serve", None), "events", None)
    if events is not None:
        events.publish(event, {"peer": person.peer, "workspace": person.workspace, "source": "inspector", **data})


def refused(request: Request, message: str, status_code: int = 400) -> HTMLResponse:
    """A page with one line saying why the request was refused."""
    return render(request, "error.html", status_code=status_code, message=message)


async def form_of(request: Request) -> tuple[dict[str, str], str | None]:
    """The posted form's fields and, when the post is refused (forged or foreign), why."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    return fields, csrf.refusal(request, fields.get(csrf.FIELD))


async def overview(request: Request) -> Response:
    person = who(request)
    runtime = runtime_of(request)
    status, points, pending = await asyncio.gather(
        runtime.status(peer=person.peer, workspace=person.workspace),
        gather.growth(runtime, person),
        runtime.approvals(actor=person.peer, workspace=person.workspace),
    )
    samples = await metrics_samples(request)
    recent = await gather.records(runtime, person, limit=10)
    return render(
        request,
        "overview.html",
        who=person,
        status=status,
        pending=len(pending),
        recent=recent,
        growth_plot=line_plot(points, title="Memory growth (records)", unit="records"),
        latency_plot=line_plot(gather.latency(samples), title="Recall latency", unit="ms"),
    )


async def recall(request: Request, person: Who, query: str, *, layer: str | None = None) -> tuple[Any, Any]:
    """Every layer's hits (or one layer's) with why; the time it took joins the service's recall samples."""
    started = time.perf_counter()
    found = await gather.recall(runtime_of(request), person, query, layer=layer)
    metrics = getattr(getattr(request.app.state, "serve", None), "metrics", None)
    if metrics is not None:
        metrics.observe("recall", time.perf_counter() - started)
    hits, failed = found
    return await gather.with_records(runtime_of(request), person, hits), failed


async def metrics_samples(request: Request) -> list[dict[str, Any]]:
    """The service's metrics samples over time (`app.state.serve.metrics`), [] when the app keeps none."""
    metrics = getattr(getattr(request.app.state, "serve", None), "metrics", None)
    samples = getattr(metrics, "samples", None)
    if samples is None:
        return []
    found = samples() if callable(samples) else samples
    return [dict(s) for s in found if isinstance(s, dict)]


def before_of(request: Request) -> float | None:
    """The `before` query parameter (unix seconds: show older records), or None; ThothError when it is no number."""
    raw = request.query_params.get("before", "")
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ThothError(f"before: expected unix seconds, got {raw[:40]!r}") from None


def older(request: Request, person: Who, found: list[Any]) -> str | None:
    """The link to the next page of older records, when this page is full."""
    if len(found) < gather.PAGE_SIZE:
        return None
    return request.url.path + person.query(before=repr(min(float(r["at"]) for r in found)))


async def sessions(request: Request) -> Response:
    person = who(request)
    found = await gather.records(runtime_of(request), person, layer="working", kind="session",
                                 limit=gather.PAGE_SIZE, before=before_of(request))
    return render(request, "records.html", who=person, title="Working sessions", records=found,
                  empty="No working sessions for this peer.", transcript=True, older=older(request, person, found))


async def identity(request: Request) -> Response:
    person = who(request)
    runtime = runtime_of(request)
    held = await gather.records(runtime, person, layer="identity", limit=200)
    facts = [r for r in held if r["kind"] != "entity"]
    entities = [r for r in held if r["kind"] == "entity"]
    names, links = gather.entity_links(entities)
    ids = {r["text"].strip(): r["id"] for r in entities}
    edges = [(link.source, link.relation, link.target) for link in links]
    picture = graph(names, edges, title="Entity graph")
    return render(request, "identity.html", who=person, facts=facts, entities=entities, links=links,
                  entity_ids=ids, picture=picture)


async def episodes(request: Request) -> Response:
    person = who(request)
    query = request.query_params.get("q", "").strip()
    runtime = runtime_of(request)
    hits, failed = await recall(request, person, query, layer="episodic") if query else ([], [])
    found = [] if query else await gather.records(runtime, person, layer="episodic", kind="episode",
                                                   limit=gather.PAGE_SIZE, before=before_of(request))
    return render(request, "episodes.html", who=person, query=query, hits=hits, failed=failed, records=found,
                  older=older(request, person, found))


async def search(request: Request) -> Response:
    person = who(request)
    query = request.query_params.get("q", "").strip()
    hits, failed = await recall(request, person, query) if query else ([], [])
    return render(request, "search.html", who=person, query=query, hits=hits, failed=failed)


async def files(request: Request) -> Response:
    person = who(request)
    runtime = runtime_of(request)
    procedural, reflection = await asyncio.gather(
        gather.records(runtime, person, layer="procedural", limit=200),
        gather.records(runtime, person, layer="reflection", limit=200),
    )
    found = procedural + reflection
    groups = [(kind, [r for r in found if r["kind"] == kind]) for kind in gather.FILE_KINDS]
    groups += [(kind, [r for r in found if r["kind"] == kind])
               for kind in dict.fromkeys(r["kind"] for r in found) if kind not in gather.FILE_KINDS]
    return render(request, "files.html", who=person, groups=[g for g in groups if g[1]])


async def record(request: Request) -> Response:
    person = who(request)
    record_id = request.path_params["record_id"]
    found = await runtime_of(request).get_record(record_id=record_id, peer=person.peer, workspace=person.workspace)
    if found is None:
        return refused(request, f"no record {record_id!r} of {person.peer}", status_code=404)
    history = []
    newer = found["text"]
    for old in found.get("history") or []:
        history.append((old, diff_lines(old["text"], newer, before_name="then", after_name="after")))
        newer = old["text"]
    return render(request, "record.html", who=person, record=found, history=history)


async def change_record(request: Request) -> Response:
    person = who(request)
    record_id = request.path_params["record_id"]
    fields, refusal = await form_of(request)
    if refusal:
        return refused(request, refusal, status_code=403)
    runtime = runtime_of(request)
    scope = {"record_id": record_id, "peer": person.peer, "workspace": person.workspace}
    action = fields.get("action")
    if action == "delete":
        deleted = await runtime.delete_record(**scope)
        message = f"deleted {record_id}" if deleted else f"{record_id} was not deleted (no layer holds it)"
        if not deleted:
            return refused(request, message, status_code=404)
        announce(request, "record", person, action="delete", id=record_id)
        to = fields.get("back", "/")
        return back(request, to if to in PAGES else "/", person, message=message)
    if action != "edit":
        return refused(request, f"action: expected edit or delete, got {action!r}")
    text = fields.get("text", "")
    if len(text) > MAX_TEXT:
        return refused(request, f"text: {len(text)} characters, at most {MAX_TEXT}")
    try:
        changed = await runtime.edit_record(text=text, **scope)
    except ThothError as exc:
        return refused(request, str(exc))
    if changed is None:
        return refused(request, f"no record {record_id!r} of {person.peer}", status_code=404)
    announce(request, "record", person, action="edit", id=changed["id"])
    return back(request, f"/records/{changed['id']}", person, message=f"saved {changed['id']}")


async def approvals(request: Request) -> Response:
    person = who(request)
    pending = await gather.approvals(runtime_of(request), person)
    return render(request, "approvals.html", who=person, pending=pending)


async def decide(request: Request) -> Response:
    person = who(request)
    item_id = request.path_params["item_id"]
    fields, refusal = await form_of(request)
    if refusal:
        return refused(request, refusal, status_code=403)
    decision = fields.get("decision", "")
    text = fields.get("text") if decision == "edit" else None
    try:
        outcome = await runtime_of(request).decide(
            item_id, decision, actor=person.peer, workspace=person.workspace, reason=fields.get("reason", ""), text=text
        )
    except ThothError as exc:
        return back(request, "/approvals", person, message=str(exc), error=True)
    announce(request, "approval", person, item_id=item_id, decision=decision)
    message = str(outcome.get("message") or f"{decision}: {item_id}")
    return back(request, "/approvals", person, message=message)


async def forget_page(request: Request) -> Response:
    return render(request, "forget.html", who=who(request))


async def forget(request: Request) -> Response:
    person = who(request)
    fields, refusal = await form_of(request)
    if refusal:
        return refused(request, refusal, status_code=403)
    if fields.get("confirm") != "yes":
        return refused(request, "confirm: tick the box to say you mean it; nothing was deleted")
    thread = fields.get("thread", "").strip() or None
    if thread is not None:
        valid_name("thread", thread)
    receipt = await runtime_of(request).forget(peer=person.peer, thread=thread, workspace=person.workspace)
    announce(request, "record", person, action="forget", thread=thread)
    return back(request, "/forget", person, receipt=receipt, thread=thread)


def handled(endpoint: Any) -> Any:
    """The endpoint with a ThothError (a bad peer name, a refused pin) shown as its one line, status 400."""

    async def run(request: Request) -> Response:
        try:
            response: Response = await endpoint(request)
        except ThothError as exc:
            return refused(request, str(exc))
        return response

    run.__name__ = endpoint.__name__
    run.__doc__ = endpoint.__doc__
    return run


def routes() -> list[BaseRoute]:
    """The inspector's routes: pages at the root, its CSS and script under /static/inspector."""
    pages = [
        Route("/", overview),
        Route("/sessions", sessions),
        Route("/identity", identity),
        Route("/episodes", episodes),
        Route("/search", search),
        Route("/files", files),
        Route("/records/{record_id:path}", record, methods=["GET"]),
        Route("/records/{record_id:path}", change_record, methods=["POST"]),
        Route("/approvals", approvals, methods=["GET"]),
        Route("/approvals/{item_id:path}", decide, methods=["POST"]),
        Route("/forget", forget_page, methods=["GET"]),
        Route("/forget", forget, methods=["POST"]),
    ]
    static = Mount(STATIC, app=StaticFiles(directory=Path(__file__).parent / "static"), name="inspector-static")
    return [
        Route(r.path, handled(r.endpoint), methods=sorted(r.methods or ()), name=r.name) for r in pages
        if isinstance(r, Route)
    ] + [static]
