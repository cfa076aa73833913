"""`thoth mcp`: serve this agent home's memory to MCP clients (Claude Code, Claude Desktop, ...)."""

from __future__ import annotations

import click

DEFAULT_PORT = 8765  # kept equal to serve.DEFAULT_PORT; not imported so `thoth --help` stays light


@click.command("mcp")
@click.option("--peer", default=None, help="Pin the server to this peer: calls may leave it out, others are refused.")
@click.option("--workspace", default=None, help="Pin the workspace (default: each call's, else thoth.toml's).")
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (with --http).")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="Port (--http; 0 picks one)."
)
def mcp(peer: str | None, workspace: str | None, http: bool, host: str, port: int) -> None:
    """Serve the agent's memory over MCP: recall, remember, forget, context, skills, approvals.

    Over stdio by default (for `claude mcp add thoth -- thoth mcp --peer "$USER"`); with --http,
    streamable HTTP on 127.0.0.1. Every call names its peer unless --peer pins one.
    """
    from thoth_core.cli import run, runtime
    from thoth_core.scope import Scope

    from .serve import serve

    rt = runtime()
    scope = Scope(peer=peer, workspace=workspace, default_workspace=str(rt.config.get("thoth.workspace")))
    run(serve(rt, scope, http=http, host=host, port=port))


__all__ = ["mcp"]
