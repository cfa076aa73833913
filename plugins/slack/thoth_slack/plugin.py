"""The `slack` frontend: `thoth slack [--http PORT]` and Slack delivery of notifications."""

from __future__ import annotations

import click

from thoth_core import hookimpl

LAYER = "frontend"  # not a memory layer: it contributes no context


@hookimpl
def register_frontends(register):  # type: ignore[no-untyped-def]
    from .serve import start

    register("slack", start)


@hookimpl
def register_cli_commands(cli):  # type: ignore[no-untyped-def]
    @cli.command("slack")
    @click.option(
        "--http",
        "http_port",
        type=int,
        default=None,
        metavar="PORT",
        help="Serve Slack's Events API over HTTP on PORT instead of Socket Mode.",
    )
    @click.option("--host", default="127.0.0.1", show_default=True, help="Interface for --http.")
    def slack(http_port: int | None, host: str) -> None:
        """Run the agent in Slack (Socket Mode unless --http)."""
        from thoth_core.cli import runtime

        from .serve import start

        start(runtime(), http_port=http_port, host=host)


@hookimpl
def notify(event, payload, runtime):  # type: ignore[no-untyped-def]
    from .bridge import running_bridge

    bridge = running_bridge(runtime)
    if bridge is not None:
        bridge.deliver(event, payload)
