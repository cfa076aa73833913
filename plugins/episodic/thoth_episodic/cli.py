"""`thoth episodes list|search|export|import|reindex` (progress bars on stderr)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import IO, Any

import click

from thoth_core import ThothError
from thoth_core.cli import HelpGroup, run, runtime, workspace_option

from .memory import explain_hit, hits_json, memory_for, render_hit
from .records import Episode, Hit


def parse_time(value: str | None) -> float | None:
    """An ISO-8601 date/time (UTC unless it says otherwise) or unix seconds."""
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise click.BadParameter(f"{value!r} is not an ISO-8601 time or unix seconds", param_hint="--as-of") from exc
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


as_of_option = click.option(
    "--as-of", "as_of", default=None, help="Read the store as it was at this time (ISO-8601 or unix seconds)."
)


def _workspace(workspace: str | None) -> str:
    return workspace or str(runtime().config.get("thoth.workspace"))


def _progress(length: int, label: str) -> Any:
    return click.progressbar(length=length, label=label, file=sys.stderr)


@click.group(cls=HelpGroup)
def episodes() -> None:
    """List, search, export, import or re-embed episodic memory."""


@episodes.command("list")
@click.option("--peer", default=None, help="Only this peer.")
@workspace_option
@as_of_option
@click.option("--limit", default=50, show_default=True, help="Newest N episodes (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def list_episodes(peer: str | None, workspace: str | None, as_of: str | None, limit: int, as_json: bool) -> None:
    """List this agent's episodes, newest last (as of a past moment with --as-of)."""

    async def go() -> None:
        at, agent = parse_time(as_of), runtime().agent
        found = list(
            memory_for(runtime()).store.episodes(workspace=_workspace(workspace), peer=peer, as_of=at, agent=agent)
        )
        found.sort(key=lambda e: e.occurred_at)
        for episode in found[-limit:] if limit else found:
            click.echo(json.dumps(episode.to_dict()) if as_json else f"{episode.id} {render_hit_line(episode)}")

    run(go())


def render_hit_line(episode: Episode) -> str:
    """One episode as a list line."""
    return render_hit(Hit(episode, 0.0))[2:]


@episodes.command("search")
@click.argument("query")
@click.option("--peer", required=True, help="Whose episodes to search.")
@workspace_option
@click.option("--k", default=5, show_default=True, help="How many episodes.")
@as_of_option
@click.option("--json", "as_json", is_flag=True, help="Episodes and scores as JSON.")
def search(query: str, peer: str, workspace: str | None, k: int, as_of: str | None, as_json: bool) -> None:
    """Search a peer's past episodes for QUERY (as of a past moment with --as-of), showing why each matched."""

    async def go() -> None:
        at = parse_time(as_of)
        hits = memory_for(runtime()).recall(query, workspace=_workspace(workspace), peer=peer, k=k, as_of=at)
        if as_json:
            click.echo(json.dumps(hits_json(hits), indent=2))
            return
        for i, hit in enumerate(hits, 1):
            click.echo(explain_hit(i, hit))
        if not hits:
            click.echo("No related episodes.")

    run(go())


@episodes.command("export")
@click.option("--peer", default=None, help="Only this peer.")
@click.option("--workspace", default=None, help="Only this workspace (default: all).")
@as_of_option
@click.option("-o", "--output", type=click.File("w"), default="-", help="JSONL file (default stdout).")
def export_episodes(peer: str | None, workspace: str | None, as_of: str | None, output: IO[str]) -> None:
    """Write this agent's episodes as JSONL (one episode per line)."""

    async def go() -> None:
        store, agent = memory_for(runtime()).store, runtime().agent
        at = parse_time(as_of)
        with _progress(store.count(workspace=workspace, peer=peer, agent=agent), "exporting") as bar:
            for episode in store.episodes(workspace=workspace, peer=peer, as_of=at, agent=agent):
                output.write(json.dumps(episode.to_dict()) + "\n")
                bar.update(1)

    run(go())


def read_jsonl(handle: IO[str]) -> Iterator[Episode]:
    """Episodes from JSONL; a bad line raises ThothError naming the line."""
    for number, line in enumerate(handle, 1):
        if not line.strip():
            continue
        try:
            yield Episode.from_dict(json.loads(line))
        except (ValueError, TypeError) as exc:
            raise ThothError(f"{getattr(handle, 'name', 'input')}:{number}: not an episode: {exc}") from exc


@episodes.command("import")
@click.argument("source", type=click.File("r"))
def import_episodes(source: IO[str]) -> None:
    """Read episodes from a JSONL file (as written by export); known ones are skipped."""

    async def go() -> None:
        items = list(read_jsonl(source))
        memory = memory_for(runtime())
        with _progress(len(items), "importing") as bar:
            stored = memory.write_many(items, progress=bar.update)
        click.echo(f"imported {stored} episodes ({len(items) - stored} already present)")
        store = memory.store
        if stored and getattr(store, "index_due", bool)():  # SQLite builds its ANN index in the process that asks
            with _progress(store.count(), "indexing") as bar:
                getattr(store, "index_now")(progress=bar.update)  # SQLite's, like `index_due`
            click.echo("built the ANN index")

    run(go())


@episodes.command("reindex")
def reindex() -> None:
    """Re-embed every episode with the configured embedder (after changing it)."""

    async def go() -> None:
        memory = memory_for(runtime())
        with _progress(memory.store.count(), "re-embedding") as bar:
            done = memory.reindex(progress=bar.update)
        click.echo(f"re-embedded {done} episodes with {memory.settings.embedder}")

    run(go())
