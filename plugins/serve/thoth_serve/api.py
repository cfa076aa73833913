"""The REST API under /v1: health, metrics, events, and each peer's memory, tools, turns, records, approvals, bundles.

Every peer route takes an optional `workspace` query parameter; peer and workspace are checked
against the service's pin (`thoth_core.scope`) before the runtime sees them. Handlers reach the
layers only through the runtime (`ops` for what is more than one call).
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, StreamingResponse
from starlette.background import BackgroundTask

from thoth_core.errors import ThothError
from thoth_core.memory_tools import NAMES, SCHEMAS
from thoth_core.writes import unsaved_message

from . import ops
from .events import sse
from .schemas import (
    ApprovalsOut,
    ContextIn,
    ContextOut,
    DecideIn,
    DecideOut,
    DeletedOut,
    EditIn,
    ErrorOut,
    ForgetIn,
    ForgetOut,
    HealthOut,
    ImportOut,
    MetricsOut,
    RecallOut,
    RecordOut,
    RecordsOut,
    RememberOut,
    TextIn,
    ToolAnswerOut,
    ToolOut,
    TurnIn,
    TurnOut,
)
from .state import ServeState

ERRORS: dict[int | str, dict[str, Any]] = {code: {"model": ErrorOut} for code in (400, 401, 403, 404, 422, 500, 503)}
SSE_TYPE = "text/event-stream"
GZIP_BODY = {"requestBody": {"content": {"application/gzip": {"schema": {"type": "string", "format": "binary"}}}}}

router = APIRouter(prefix="/v1", responses=ERRORS)


def serve_state(request: Request) -> ServeState:
    """The service state of the app serving this request."""
    state: ServeState = request.app.state.serve
    return state


State = Annotated[ServeState, Depends(serve_state)]
WorkspaceQuery = Annotated[str | None, Query(description="The workspace (default: the pinned one, else thoth.toml's).")]
ThreadQuery = Annotated[str | None, Query(description="The thread the call belongs to (default `api`).")]
WRITE_TOOLS = ("remember", "correct")


def where(state: ServeState, peer: str, workspace: str | None) -> tuple[str, str]:
    """The (peer, workspace) a request may use, by the service's pin."""
    return state.scope.peer_for(peer), state.scope.workspace_for(workspace)


# --- the service -------------------------------------------------------------------------


@router.get("/health", response_model=HealthOut, tags=["service"])
async def health(state: State) -> dict[str, Any]:
    """Whether the service answers, and what it runs with."""
    runtime = state.runtime
    return {
        "status": "ok",
        "version": version(),
        "home": str(runtime.home),
        "pid": os.getpid(),
        "plugins": sorted(name for name, _ in runtime.pm.list_name_plugin()),
        "peer": state.scope.peer,
        "workspace": state.scope.workspace_for(None),
    }


@router.get("/metrics", response_model=MetricsOut, tags=["service"])
async def metrics(state: State, peer: str | None = None, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Counts, latency medians and p95 of this process, recent samples; each layer's counts with `peer`."""
    report = state.metrics.report()
    layers: list[dict[str, Any]] = []
    if peer or state.scope.peer:
        who, space = where(state, peer or "", workspace)
        layers = ops.jsonable(await state.runtime.status(peer=who, workspace=space))
    return {**report, "pid": os.getpid(), "layers": layers}


@router.get(
    "/events",
    tags=["service"],
    response_class=StreamingResponse,
    responses={200: {"content": {SSE_TYPE: {}}, "description": "`turn`, `record`, `approval`, ... events; `ping`"}},
)
async def events(state: State, peer: str | None = None) -> StreamingResponse:
    """Server-sent events of this process: a turn landed, a record changed, an approval is asked for."""
    only = state.scope.peer_for(peer) if (peer or state.scope.peer) else None

    async def stream() -> AsyncIterator[bytes]:
        yield b": connected\n\n"
        async for event, data in state.events.stream(peer=only):
            yield sse(event, data)

    return StreamingResponse(stream(), media_type=SSE_TYPE, headers={"Cache-Control": "no-store"})


# --- memory -------------------------------------------------------------------------------


@router.post("/peers/{peer}/memories", response_model=RememberOut, tags=["memory"])
async def remember(peer: str, body: TextIn, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Keep a hard fact (`my name is Ada`) or a note about the peer: what `/remember` does."""
    peer, workspace = where(state, peer, workspace)
    answer = await ops.remember(
        state.runtime, peer=peer, workspace=workspace, text=body.text, thread=ops.thread_for(body.thread)
    )
    state.metrics.count("remember")
    state.events.publish("record", {"peer": peer, "workspace": workspace, "action": "remember", "text": body.text})
    return answer


@router.get("/peers/{peer}/recall", response_model=RecallOut, tags=["memory"])
async def recall(
    peer: str,
    state: State,
    q: Annotated[str, Query(min_length=1, max_length=2000, description="What to look for.")],
    k: Annotated[int, Query(ge=1, le=ops.MAX_K, description="At most this many hits.")] = 8,
    workspace: WorkspaceQuery = None,
    layer: Annotated[str | None, Query(max_length=128, description="Only this layer's (or plugin's) hits.")] = None,
) -> dict[str, Any]:
    """Every layer's memories of the peer matching `q` in one list, each with why it matched and its place."""
    peer, workspace = where(state, peer, workspace)
    started = time.perf_counter()
    found = await ops.recall(state.runtime, peer=peer, workspace=workspace, query=q, k=k, layer=layer)
    state.metrics.observe("recall", time.perf_counter() - started)
    return found


@router.post("/peers/{peer}/context", response_model=ContextOut, tags=["memory"])
async def context(peer: str, body: ContextIn, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """The context a turn with this message would get, per block, and what the budgets cut; no model call."""
    peer, workspace = where(state, peer, workspace)
    started = time.perf_counter()
    found = await ops.context(
        state.runtime, peer=peer, workspace=workspace, message=body.message, thread=ops.thread_for(body.thread)
    )
    state.metrics.observe("context", time.perf_counter() - started)
    return found


@router.post("/peers/{peer}/forget", response_model=ForgetOut, tags=["memory"])
async def forget(peer: str, body: ForgetIn, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Delete the peer's data (or one thread of it) in every layer, with `confirm: true`; the receipt."""
    peer, workspace = where(state, peer, workspace)
    receipt = await ops.forget(state.runtime, peer=peer, workspace=workspace, thread=body.thread, confirm=body.confirm)
    state.metrics.count("forget")
    state.events.publish("record", {"peer": peer, "workspace": workspace, "action": "forget", "thread": body.thread})
    return receipt


# --- tools --------------------------------------------------------------------------------


@router.get("/tools", response_model=list[ToolOut], tags=["tools"])
async def tools() -> list[dict[str, Any]]:
    """The memory tools a turn's model is given (`recall`, `remember`, `correct`), with their input schemas."""
    return [dict(SCHEMAS[name]) for name in NAMES]


@router.post("/peers/{peer}/tools/{name}", response_model=ToolAnswerOut, tags=["tools"])
async def tool(
    peer: str,
    name: str,
    body: Annotated[dict[str, Any], Body(description="The tool's input, as its input_schema says.")],
    state: State,
    workspace: WorkspaceQuery = None,
    thread: ThreadQuery = None,
) -> dict[str, Any]:
    """Run one memory tool for the peer exactly as a turn's model does: its answer, in the words the model reads."""
    peer, workspace = where(state, peer, workspace)
    if name not in SCHEMAS:
        raise HTTPException(404, f"tool {name!r}: none such; one of {', '.join(NAMES)}")
    started = time.perf_counter()
    answer = await ops.tool(
        state.runtime, name=name, tool_input=body, peer=peer, workspace=workspace, thread=ops.thread_for(thread)
    )
    state.metrics.observe(f"tool_{name}", time.perf_counter() - started)
    if name in WRITE_TOOLS:
        state.events.publish("record", {"peer": peer, "workspace": workspace, "action": name, "answer": answer["text"]})
    return answer


# --- turns --------------------------------------------------------------------------------


@router.post(
    "/peers/{peer}/turns",
    tags=["turns"],
    response_model=TurnOut,
    responses={
        200: {
            "content": {SSE_TYPE: {}, "application/json": {}},
            "description": "`delta` {text} events, then `done` (TurnOut) or `error` {error}; "
            "with `Accept: application/json`, one TurnOut.",
        }
    },
)
async def turn(peer: str, body: TurnIn, request: Request, state: State, workspace: WorkspaceQuery = None) -> Any:
    """One whole turn (or a slash command), kept like a CLI turn; the reply streams as server-sent events.

    A client that lost the connection may send the turn again with the same `turn_id`: it is kept once.
    """
    peer, workspace = where(state, peer, workspace)
    thread = ops.thread_for(body.thread)
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    started = time.perf_counter()
    first: list[float] = []

    def on_delta(text: str) -> None:
        if not first:
            first.append(time.perf_counter() - started)
            state.metrics.observe("turn_first_byte", first[0])
        queue.put_nowait(("delta", {"text": text}))

    work = asyncio.ensure_future(
        state.runtime.turn(
            body.text, peer=peer, thread=thread, workspace=workspace, on_delta=on_delta, turn_id=body.turn_id
        )
    )
    state.turns.add(work)
    work.add_done_callback(state.turns.discard)
    work.add_done_callback(lambda _: queue.put_nowait(("end", None)))

    def finished() -> dict[str, Any]:
        result = work.result()
        reply = result.reply
        state.metrics.observe("turn", time.perf_counter() - started)
        if reply.error:
            raise ThothError(reply.error)
        state.events.publish(
            "turn", {"peer": peer, "workspace": result.session.workspace, "thread": thread, "turn_id": result.turn.id}
        )
        return {
            "reply": reply.text,
            "turn_id": result.turn.id,
            "model": reply.model,
            "usage": asdict(reply.usage),
            "tools": result.assembly.tools,
            "cut_short": reply.cut_short,
            "thread": thread,
        }

    async def saved() -> dict[str, Any]:
        """Which layers could not save the turn, and the line a person is told (`thoth ask` prints it, exit 3)."""
        wait = float(state.runtime.config.get("thoth.exit_deadline"))
        failed = await state.runtime.not_saved(work.result().turn.id, timeout=wait)
        return {"failed": failed, "message": unsaved_message(failed) if failed else None}

    accept = request.headers.get("accept", "")
    if "application/json" in accept and SSE_TYPE not in accept:
        await asyncio.shield(work)
        answer = finished()
        return answer | {"not_saved": (await saved())["message"]} if body.saved else answer
    head = await queue.get()
    done = finished() if head[0] == "end" else None  # refused before any reply (no model, bad text): one error

    async def stream() -> AsyncIterator[bytes]:
        if done is not None:
            yield sse("done", done)
            return
        item = head
        while item[0] != "end":
            yield sse(*item)
            item = await queue.get()
        try:
            yield sse("done", finished())
        except Exception as exc:  # noqa: BLE001 - the client sees it as the stream's last event
            yield sse("error", {"error": ops.one_line(exc)})
            return
        if body.saved:
            yield sse("saved", await saved())

    return StreamingResponse(stream(), media_type=SSE_TYPE, headers={"Cache-Control": "no-store"})


# --- records ------------------------------------------------------------------------------

Limit = Annotated[int, Query(ge=1, le=500, description="At most this many, newest first.")]
Before = Annotated[float | None, Query(description="Only records older than this (unix seconds): the next page.")]


async def list_records(
    state: ServeState,
    peer: str,
    workspace: str | None,
    *,
    layer: str | None,
    kind: str | None,
    limit: int,
    before: float | None,
) -> dict[str, Any]:
    peer, space = where(state, peer, workspace)
    found = await state.runtime.records(peer=peer, workspace=space, layer=layer, kind=kind, limit=limit, before=before)
    return {"records": ops.jsonable(found)}


async def one_record(state: ServeState, peer: str, workspace: str | None, record_id: str) -> dict[str, Any]:
    peer, space = where(state, peer, workspace)
    found = await state.runtime.get_record(record_id=record_id, peer=peer, workspace=space)
    if found is None:
        raise HTTPException(404, f"record {record_id!r}: none such of peer {peer!r}")
    return dict(ops.jsonable(found))


async def edit_record(state: ServeState, peer: str, workspace: str | None, record_id: str, text: str) -> dict[str, Any]:
    peer, space = where(state, peer, workspace)
    found = await state.runtime.edit_record(record_id=record_id, text=text, peer=peer, workspace=space)
    if found is None:
        raise HTTPException(404, f"record {record_id!r}: none such of peer {peer!r}, or it cannot be edited")
    state.events.publish("record", {"peer": peer, "workspace": space, "action": "edit", "id": record_id})
    return dict(ops.jsonable(found))


async def delete_record(state: ServeState, peer: str, workspace: str | None, record_id: str) -> dict[str, Any]:
    peer, space = where(state, peer, workspace)
    deleted = await state.runtime.delete_record(record_id=record_id, peer=peer, workspace=space)
    if not deleted:
        raise HTTPException(404, f"record {record_id!r}: none such of peer {peer!r}, or it cannot be deleted")
    state.events.publish("record", {"peer": peer, "workspace": space, "action": "delete", "id": record_id})
    return {"id": record_id, "deleted": True}


@router.get("/peers/{peer}/records", response_model=RecordsOut, tags=["records"])
async def records(
    peer: str,
    state: State,
    layer: str | None = None,
    kind: str | None = None,
    limit: Limit = 50,
    before: Before = None,
    workspace: WorkspaceQuery = None,
) -> dict[str, Any]:
    """What the layers hold of the peer, newest first: `layer` and `kind` narrow it (e.g. identity, fact)."""
    return await list_records(state, peer, workspace, layer=layer, kind=kind, limit=limit, before=before)


@router.get("/peers/{peer}/records/{record_id:path}", response_model=RecordOut, tags=["records"])
async def record(peer: str, record_id: str, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """One record with its history (earlier versions, newest first)."""
    return await one_record(state, peer, workspace, record_id)


@router.patch("/peers/{peer}/records/{record_id:path}", response_model=RecordOut, tags=["records"])
async def record_edit(
    peer: str, record_id: str, body: EditIn, state: State, workspace: WorkspaceQuery = None
) -> dict[str, Any]:
    """Correct a record's text, as `/correct` does; the record as it now stands."""
    return await edit_record(state, peer, workspace, record_id, body.text)


@router.delete("/peers/{peer}/records/{record_id:path}", response_model=DeletedOut, tags=["records"])
async def record_delete(peer: str, record_id: str, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Delete a record, as `/correct ID delete` does."""
    return await delete_record(state, peer, workspace, record_id)


@router.get("/peers/{peer}/facts", response_model=RecordsOut, tags=["records"])
async def facts(
    peer: str, state: State, limit: Limit = 50, before: Before = None, workspace: WorkspaceQuery = None
) -> dict[str, Any]:
    """The identity layer's facts about the peer, newest first (each one's history: GET records/ID)."""
    return await list_records(state, peer, workspace, layer="identity", kind="fact", limit=limit, before=before)


@router.get("/peers/{peer}/facts/{record_id:path}", response_model=RecordOut, tags=["records"])
async def fact(peer: str, record_id: str, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """One fact with its history."""
    return await one_record(state, peer, workspace, record_id)


@router.patch("/peers/{peer}/facts/{record_id:path}", response_model=RecordOut, tags=["records"])
async def fact_edit(
    peer: str, record_id: str, body: EditIn, state: State, workspace: WorkspaceQuery = None
) -> dict[str, Any]:
    """Correct a fact."""
    return await edit_record(state, peer, workspace, record_id, body.text)


@router.delete("/peers/{peer}/facts/{record_id:path}", response_model=DeletedOut, tags=["records"])
async def fact_delete(peer: str, record_id: str, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Delete a fact."""
    return await delete_record(state, peer, workspace, record_id)


@router.get("/peers/{peer}/episodes", response_model=RecordsOut, tags=["records"])
async def episodes(
    peer: str, state: State, limit: Limit = 50, before: Before = None, workspace: WorkspaceQuery = None
) -> dict[str, Any]:
    """The episodic layer's episodes of the peer, newest first."""
    return await list_records(state, peer, workspace, layer="episodic", kind="episode", limit=limit, before=before)


@router.get("/peers/{peer}/episodes/search", response_model=RecallOut, tags=["records"])
async def episodes_search(
    peer: str,
    state: State,
    q: Annotated[str, Query(min_length=1, max_length=2000)],
    k: Annotated[int, Query(ge=1, le=ops.MAX_K)] = 8,
    workspace: WorkspaceQuery = None,
) -> dict[str, Any]:
    """The episodes matching `q`, each with why it matched."""
    peer, space = where(state, peer, workspace)
    return await ops.recall(state.runtime, peer=peer, workspace=space, query=q, k=k, layer="episodic")


@router.delete("/peers/{peer}/episodes/{record_id:path}", response_model=DeletedOut, tags=["records"])
async def episode_delete(peer: str, record_id: str, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Delete an episode."""
    return await delete_record(state, peer, workspace, record_id)


# --- approvals ----------------------------------------------------------------------------


@router.get("/approvals", response_model=ApprovalsOut, tags=["approvals"])
async def approvals(state: State, peer: str | None = None, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """The pending items the approvals policy lets `peer` see: all of them for a decider, else those about them."""
    who, space = where(state, peer or "", workspace)
    return {"items": await ops.approvals(state.runtime, peer=who, workspace=space)}


@router.post("/approvals/{item_id:path}", response_model=DecideOut, tags=["approvals"])
async def decide(item_id: str, body: DecideIn, state: State, workspace: WorkspaceQuery = None) -> dict[str, Any]:
    """Approve (optionally as edited: `text`) or reject an item as `peer`, if the approvals policy lets them."""
    who, space = where(state, body.peer or "", workspace)
    outcome = await state.runtime.decide(
        item_id, body.decision, actor=who, workspace=space, reason=body.reason, text=body.text
    )
    state.events.publish("approval", {"peer": who, "workspace": space, "item_id": item_id, "decision": body.decision})
    return {"item_id": item_id, "decision": body.decision, "outcome": ops.jsonable(outcome)}


# --- bundles ------------------------------------------------------------------------------


def whole_home(state: ServeState, what: str) -> None:
    """Refuse a home-wide operation on a service pinned to one peer."""
    if state.scope.peer is not None:
        raise HTTPException(403, f"{what}: refused; this service is pinned to peer {state.scope.peer!r} (--peer)")


@router.get(
    "/bundle",
    tags=["bundle"],
    response_class=FileResponse,
    responses={200: {"content": {"application/gzip": {}}, "description": "The bundle (.tar.gz)."}},
)
async def bundle_export(state: State) -> FileResponse:
    """Every layer's records and the home's files as one .tar.gz (`thoth bundle export`)."""
    from thoth_core.bundle import export_bundle

    whole_home(state, "bundle export")
    folder = Path(tempfile.mkdtemp(prefix="thoth-bundle-"))
    path = folder / "thoth-bundle.tar.gz"
    await state.runtime.drain()  # turns still being written belong in the bundle
    await asyncio.to_thread(export_bundle, state.runtime, path)
    return FileResponse(
        path, media_type="application/gzip", filename=path.name, background=BackgroundTask(remove_tree, folder)
    )


@router.post(
    "/bundle",
    tags=["bundle"],
    response_model=ImportOut,
    openapi_extra=GZIP_BODY,
)
async def bundle_import(request: Request, state: State, merge: bool = False) -> dict[str, Any]:
    """Load a bundle (the request body, .tar.gz) into this home: a fresh one, or any with `merge=true`."""
    from thoth_core.bundle import Limits, ensure_fresh, import_bundle, open_bundle

    whole_home(state, "bundle import")
    limits = Limits.of(state.runtime.config)
    folder = Path(tempfile.mkdtemp(prefix="thoth-bundle-"))
    path = folder / "upload.tar.gz"
    try:
        size = 0
        with path.open("wb") as upload:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limits.total_bytes:
                    raise HTTPException(400, f"bundle: over {limits.total_bytes} bytes ([bundle] max_total_mb)")
                upload.write(chunk)
        if size == 0:
            raise HTTPException(400, "bundle: the request body is empty; send the .tar.gz as the body")
        opened = await asyncio.to_thread(open_bundle, path, limits=limits)
        try:
            if not merge:
                await asyncio.to_thread(ensure_fresh, state.runtime)
            report = await asyncio.to_thread(import_bundle, state.runtime, opened, merge=merge)
        finally:
            opened.close()
    finally:
        remove_tree(folder)
    done = asdict(report)
    return {key: done[key] for key in ("added", "written", "unchanged", "kept", "unread")}


def remove_tree(folder: Path) -> None:
    """Delete a temp folder and what it holds."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)


def version() -> str:
    """thoth-serve's version, or empty."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("thoth-serve")
    except PackageNotFoundError:
        return ""


__all__ = ["router", "serve_state", "version"]
