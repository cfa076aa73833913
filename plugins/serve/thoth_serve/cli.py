"""`thoth serve`: this agent home's memory as a resident service (REST API, SSE turns, MCP, inspector)."""

from __future__ import annotations

from pathlib import Path

import click

DEFAULT_PORT = 8766  # kept equal to options.DEFAULT_PORT; not imported so `thoth --help` stays light


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on; others need a token.")
@click.option(
    "--port", default=DEFAULT_PORT, show_default=True, type=click.IntRange(0, 65535), help="Port (0 picks a free one)."
)
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Processes serving the same port; more than one needs the shared PostgreSQL store ([storage] url).",
)
@click.option("--peer", default=None, help="Pin the service to this peer: requests for any other are refused.")
@click.option("--workspace", default=None, help="Pin the workspace (default: each request's, else thoth.toml's).")
@click.option("--cors-origin", "cors_origins", multiple=True, help="Allow browser calls from this origin (repeatable).")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Read the bearer token from this file's first line (default: $THOTH_TOKEN; none: no token).",
)
def serve(
    host: str,
    port: int,
    workers: int,
    peer: str | None,
    workspace: str | None,
    cors_origins: tuple[str, ...],
    token_file: Path | None,
) -> None:
    """Serve this agent home as one resident service: REST API under /v1, MCP at /mcp, the inspector at /.

    Prints one line THOTH_URL=http://HOST:PORT on stdout when ready; logs go to stderr. Loopback by
    default; any other address needs a token (THOTH_TOKEN or --token-file), which every request must
    then send as `Authorization: Bearer TOKEN`. Ctrl-C or SIGTERM stops it after ending its sessions.
    """
    from thoth_core.config import load_config
    from thoth_core.database import reachable, storage_url
    from thoth_core.errors import ThothError
    from thoth_core.home import default_home
    from thoth_core.scope import Scope

    from .options import ServeOptions, read_token
    from .run import serve as run_service

    config = load_config()
    Scope(peer=peer, workspace=workspace)  # a malformed pin is one line before anything starts
    options = ServeOptions(
        host=host,
        port=port,
        token=read_token(token_file),
        peer=peer,
        workspace=workspace,
        cors_origins=cors_origins,
        config=str(config.path.resolve()) if config.path else None,
    ).check()
    if workers > 1 and storage_url(config) is None:
        raise ThothError(
            f"--workers {workers}: several workers need the shared PostgreSQL store ([storage] url in "
            f"{config.source}); with SQLite files run one worker"
        )
    if workers > 1:
        reachable(config)  # a store that refuses its URL is one line here, not one per worker
    run_service(options, workers=workers, home=default_home(config))


__all__ = ["serve"]
