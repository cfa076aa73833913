"""`thoth identity show|entity|edit|delete|export|import|forget --peer P`."""

from __future__ import annotations

import asyncio
import getpass
import json
import time
from pathlib import Path
from typing import Any

import click

from thoth_core import ThothError
from thoth_core.cli import HelpGroup, run, runtime

from .backend import validate_export
from .layer import backend_for
from .policy import visible
from .render import fact_label

peer_option = click.option("--peer", required=True, help="The peer (person) concerned.")
workspace_option = click.option("--workspace", default=None, help="Workspace (default from thoth.toml).")


def _workspace(workspace: str | None) -> str:
    return workspace or str(runtime().config.get("thoth.workspace"))


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(at)) if at else "now"


async def _call(function: Any, *args: Any, **kwargs: Any) -> Any:
    return await asyncio.to_thread(function, *args, **kwargs)


@click.group(cls=HelpGroup)
def identity() -> None:
    """L2 identity memory: what the agent holds about each person."""


@identity.command()
@peer_option
@workspace_option
@click.option("--limit", default=20, show_default=True, help="Observations to list.")
def show(peer: str, workspace: str | None, limit: int) -> None:
    """Facts (with their history) and recent observations about a peer."""
    backend = backend_for(runtime())
    ws = _workspace(workspace)

    def gather() -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], set[str]]:
        history = backend.store.fact_history(ws, peer)
        observations = backend.store.recent_observations(ws, peer, limit=limit)
        facts, notes = visible(backend.store, ws, peer, facts=history, observations=observations)
        shown = {f"f{f['id']}" for f in facts} | {f"o{o['id']}" for o in notes}
        return backend.status(ws, peer), history, observations, shown

    status, history, observations, shown = run(_call(gather))
    held = "; not shown: the write policy holds it"
    click.echo(
        f"{peer} ({ws}, {backend.name} backend): "
        + ", ".join(f"{k} {v}" for k, v in status.items() if k not in ("layer", "backend"))
    )
    if history:
        click.echo("Facts:")
    for fact in history:
        state = "current" if fact["valid_to"] is None else f"until {_when(fact['valid_to'])}"
        mark = "" if f"f{fact['id']}" in shown else held
        when = _when(fact["valid_from"])
        click.echo(f"  f{fact['id']} {fact_label(fact, peer)}  [from {when}, {state}; {fact['source']}{mark}]")
    if observations:
        click.echo("Observations (newest first):")
    for o in observations:
        when = _when(o["created_at"])
        mark = "" if f"o{o['id']}" in shown else held
        click.echo(f"  o{o['id']} {o['content']}  [{o['kind']}, {o['author']}, {o['confidence']:.1f}, {when}{mark}]")
    if history or observations:
        click.echo("Correct one with `thoth identity edit ID TEXT` or `thoth identity delete ID` (--peer as above).")


@identity.command("entity")
@click.argument("name")
@peer_option
@workspace_option
def entity_command(name: str, peer: str, workspace: str | None) -> None:
    """Facts about NAME (a person or thing the peer mentioned, or the peer), with history, and one hop away."""
    from .graph import neighbourhood

    backend = backend_for(runtime())
    ws = _workspace(workspace)
    current, history = run(_call(lambda: (backend.store.current_facts(ws, peer), backend.store.fact_history(ws, peer))))
    near = neighbourhood(current, peer, name)
    entity = near["entity"]
    if not (near["facts"] or near["pointing"]):
        raise ThothError(
            f"{peer}'s memory holds no fact about or pointing at {name!r}; `thoth identity show` lists them"
        )
    click.echo(f"{entity} (in {peer}'s memory, {ws}):")
    for fact in [f for f in history if f["subject"] == entity]:
        state = "current" if fact["valid_to"] is None else f"until {_when(fact['valid_to'])}"
        click.echo(
            f"  f{fact['id']} {fact['predicate'].replace('_', ' ')}: {fact['object']}  [{state}; {fact['source']}]"
        )
    if near["pointing"]:
        click.echo(f"Pointing at {entity}:")
    for fact in near["pointing"]:
        click.echo(f"  f{fact['id']} {fact['subject']} -{fact['predicate']}-> {fact['object']}")
    for other, rows in near["hops"].items():
        click.echo(f"One hop away: {other}" + ("" if rows else " (no facts about it)"))
        for fact in rows:
            click.echo(f"  f{fact['id']} {fact['predicate'].replace('_', ' ')}: {fact['object']}")


@identity.command("edit")
@click.argument("item")
@click.argument("text")
@peer_option
@workspace_option
def edit_command(item: str, text: str, peer: str, workspace: str | None) -> None:
    """Correct one fact (f12: a new value, the old one kept as history) or observation (o34) about a peer."""
    click.echo(_correct(item, text, peer, workspace))


@identity.command("delete")
@click.argument("item")
@peer_option
@workspace_option
def delete_command(item: str, peer: str, workspace: str | None) -> None:
    """Delete one fact (f12) or observation (o34) about a peer, erased from the file."""
    click.echo(_correct(item, None, peer, workspace))


def _correct(item: str, text: str | None, peer: str, workspace: str | None) -> str:
    from .corrections import correct

    rt = runtime()
    store = backend_for(rt).store
    who = {"workspace": _workspace(workspace), "peer": peer, "actor": f"cli:{getpass.getuser()}"}
    return str(run(_call(correct, store, rt, item=item, text=text, **who)))


@identity.command("export")
@peer_option
@workspace_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write to a file instead of stdout.",
)
@click.option("--local-only", is_flag=True, help="Only the local rows, not what Honcho holds (when it is down).")
def export_command(peer: str, workspace: str | None, output: Path | None, local_only: bool) -> None:
    """Everything held about a peer as one JSON document (fails when Honcho cannot be read)."""
    backend = backend_for(runtime())
    options = {"local_only": True} if local_only and backend.name == "honcho" else {}
    document = run(_call(backend.export, _workspace(workspace), peer, **options))
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str)
    if output is None:
        click.echo(text)
        return
    output.write_text(text + "\n", encoding="utf-8")
    click.echo(f"wrote {output}", err=True)


@identity.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--peer", default=None, help="Import as this peer (default: the peer named in the file).")
@workspace_option
def import_command(path: Path, peer: str | None, workspace: str | None) -> None:
    """Add an exported document's facts, observations and messages to a peer."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ThothError(f"{path}: cannot read an identity export: {exc}") from exc
    try:
        validate_export(document)
    except ThothError as exc:
        raise ThothError(f"{path}: {exc}") from exc
    target = peer or document.get("peer")
    if not target:
        raise ThothError(f"{path}: no peer in the file; pass --peer")
    added = run(_call(backend_for(runtime()).import_document, document, workspace=_workspace(workspace), peer=target))
    click.echo(f"Imported into {target}: " + ", ".join(f"{n} {what}" for what, n in added.items()))


@identity.command("forget")
@peer_option
@click.option("--thread", default=None, help="Only this thread.")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="The receipt as JSON.")
@click.option("--wait", is_flag=True, help="Honcho: wait until its queue has deleted everything; final counts.")
@click.option("--wait-timeout", default=120.0, show_default=True, help="Seconds --wait waits at most.")
def forget_command(
    peer: str, thread: str | None, workspace: str | None, as_json: bool, wait: bool, wait_timeout: float
) -> None:
    """Delete what the identity layer holds about a peer and print a receipt."""
    backend = backend_for(runtime())
    receipt = run(_call(backend.forget, _workspace(workspace), peer, thread, wait=wait_timeout if wait else 0.0))
    if as_json:
        click.echo(json.dumps(receipt, indent=2))
        return
    scope = f"peer {peer}" + (f", thread {thread}" if thread else "")
    click.echo(f"Identity layer forgot {scope}: " + ", ".join(f"{n} {what}" for what, n in receipt.items()))
    if receipt.get("honcho_sessions_queued") and "honcho_wait_seconds" not in receipt:
        click.echo("Honcho deletes the queued sessions' messages and conclusions in the background (--wait waits).")
    if receipt.get("honcho_peer_kept"):
        click.echo("Honcho has no way to delete a peer: its id and metadata stay in Honcho; its data is gone.")
    if receipt.get("honcho_wait_timed_out"):
        raise ThothError(f"Honcho still holds data of {peer} after {wait_timeout:.0f}s; run the command again later")
