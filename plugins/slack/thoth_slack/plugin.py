"""The `slack` frontend: `thoth slack [--http PORT]`, `thoth slack manifest`, and Slack delivery of notifications."""

from __future__ import annotations

import click

from thoth_core import hookimpl

from .settings import CONFIG_DEFAULTS as CONFIG_DEFAULTS  # the core reads it here: the table's keys

LAYER = "frontend"  # not a memory layer: it contributes no context


@hookimpl
def register_frontends(register):  # type: ignore[no-untyped-def]
    from .serve import start

    register("slack", start)


@hookimpl
def register_cli_commands(cli):  # type: ignore[no-untyped-def]
    @cli.group("slack", invoke_without_command=True)
    @click.option(
        "--http",
        "http_port",
        type=int,
        default=None,
        metavar="PORT",
        help="Serve Slack's Events API over HTTP on PORT instead of Socket Mode.",
    )
    @click.option("--host", default="127.0.0.1", show_default=True, help="Interface for --http.")
    @click.pass_context
    def slack(ctx: click.Context, http_port: int | None, host: str) -> None:
        """Run the agent in Slack (Socket Mode unless --http)."""
        if ctx.invoked_subcommand is not None:
            return
        from thoth_core.cli import runtime

        from .serve import start

        start(runtime(), http_port=http_port, host=host)

    @slack.command("manifest")
    def manifest() -> None:
        """Print the Slack app manifest (paste it at api.slack.com/apps: From a manifest)."""
        from importlib.resources import files

        click.echo(files("thoth_slack").joinpath("manifest.yaml").read_text(encoding="utf-8"), nl=False)


@hookimpl
def forget(peer, thread, workspace, runtime):  # type: ignore[no-untyped-def]
    """Delete the ledger's record of messages posted to or about the peer (the bridge's, or the file's)."""
    from pathlib import Path

    from thoth_core.database import shared

    from .bridge import running_bridge
    from .outbound import Ledger

    bridge = running_bridge(runtime)
    if bridge is not None:
        bridge.drain.forget(workspace, peer, thread)  # the texts it holds as received, not yet answered
    path = Path(runtime.home) / "slack" / "ledger.db"
    if bridge is None and not path.exists() and not shared(runtime.config):
        return None
    ledger = bridge.ledger if bridge is not None else Ledger(path, config=runtime.config)
    try:
        count = ledger.forget(workspace, peer, thread)
    finally:
        if bridge is None:
            ledger.close()
    return {"ledger entries": count} if count else None


@hookimpl
def notify(event, payload, runtime):  # type: ignore[no-untyped-def]
    from .bridge import running_bridge

    bridge = running_bridge(runtime)
    if bridge is not None:
        bridge.deliver(event, payload)


@hookimpl
def workspace_admin(peer, workspace, runtime):  # type: ignore[no-untyped-def]
    """Whether a Slack user administers the running bridge's team (users.info); None for other workspaces."""
    from .bridge import running_bridge

    bridge = running_bridge(runtime)
    return bridge.is_admin(peer, workspace) if bridge is not None else None
