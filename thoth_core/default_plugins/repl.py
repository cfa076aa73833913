"""The `repl` frontend: a plain line-by-line chat on stdin/stdout, used when no TUI is installed."""

from __future__ import annotations

import asyncio
import getpass
import sys
from typing import TYPE_CHECKING

import click

from thoth_core import ThothError, hookimpl

if TYPE_CHECKING:
    from thoth_core.runtime import Runtime


async def _chat(runtime: Runtime, peer: str, thread: str | None) -> None:
    thread = thread or await runtime.last_thread(peer=peer) or "repl"  # a restart reopens the last thread
    click.echo(f"Thoth (plain chat) - peer {peer}, thread {thread}. /help for commands, Ctrl-D to quit.")
    session = await runtime.session(peer=peer, thread=thread)
    loop = asyncio.get_running_loop()
    while True:
        click.echo("> ", nl=False)
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        if not line.strip():
            continue
        try:
            result = await runtime.turn(
                line.strip(), peer=peer, thread=thread, on_delta=lambda d: click.echo(d, nl=False)
            )
            if result.reply.model == "command":
                click.echo(result.reply.text, nl=False)
            session = result.session
        except ThothError as exc:
            click.echo(f"error: {exc}", err=True)
            continue
        click.echo()
    await runtime.end_session(session, "exit")
    await runtime.aclose()


def start(runtime: Runtime, *, peer: str | None = None, thread: str | None = None) -> None:
    """Run the plain chat until end of input."""
    asyncio.run(_chat(runtime, peer or getpass.getuser(), thread))


@hookimpl(trylast=True)
def register_frontends(register):  # type: ignore[no-untyped-def]
    register("repl", start)
