"""`thoth board get|put|ls|watch`: the blackboard for people."""

from __future__ import annotations

import asyncio
import getpass
import json

import click

from thoth_core import ThothError
from thoth_core.cli import HelpGroup, run, runtime

from .board import Board
from .state import board_for, settings_of


@click.group(cls=HelpGroup)
@click.option("--workspace", default=None, help="Workspace whose board to use (default from thoth.toml).")
@click.pass_context
def board(ctx: click.Context, workspace: str | None) -> None:
    """Read, write and watch the shared blackboard."""
    ctx.meta["thoth.board.workspace"] = workspace


def _board() -> Board:
    return board_for(runtime(), click.get_current_context().meta.get("thoth.board.workspace"))


@board.command()
@click.argument("key")
def get(key: str) -> None:
    """Print the current value of KEY."""
    signal = run(_board().get(key))
    if signal is None:
        raise click.ClickException(f"{key} is not set")
    click.echo(signal.value)


@board.command()
@click.argument("key")
@click.argument("value")
@click.option("--publisher", default=getpass.getuser, show_default="your user name")
def put(key: str, value: str, publisher: str) -> None:
    """Publish VALUE under KEY."""
    signal = run(_board().publish(key, value, publisher=publisher))
    click.echo(f"{signal.key} = {signal.value} (id {signal.id})")


@board.command("ls")
@click.argument("prefix", default="")
@click.option("--json", "as_json", is_flag=True)
def list_(prefix: str, as_json: bool) -> None:
    """List current values of keys starting with PREFIX."""
    signals = run(_board().list(prefix))
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in signals], indent=2))
        return
    for s in signals:
        click.echo(f"{s.key} = {s.value}" + (f"  ({s.publisher})" if s.publisher else ""))


@board.command()
@click.argument("pattern")
@click.option("--count", type=int, default=0, help="Stop after this many signals (0: never).")
@click.option("--timeout", type=float, default=0, help="Stop after this many seconds (0: never).")
def watch(pattern: str, count: int, timeout: float) -> None:
    """Print every new signal whose key matches PATTERN (`task:42:*` or an exact key)."""

    if settings_of(runtime()).backend == "memory":
        raise ThothError(
            'watch needs a board shared between processes: set [plugins.blackboard] backend = "sqlite" or "redis"'
        )

    async def follow() -> None:
        subscription = await _board().subscribe(pattern)
        seen = 0

        async def loop() -> None:
            nonlocal seen
            async for signal in subscription:
                click.echo(json.dumps(signal.__dict__), color=False)
                seen += 1
                if count and seen >= count:
                    return

        try:
            await asyncio.wait_for(loop(), timeout or None)
        except TimeoutError:
            pass
        finally:
            await subscription.close()

    run(follow())
