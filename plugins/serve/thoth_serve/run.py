"""Running the service: bind the socket, serve with uvicorn (one process, or N workers), say the URL once.

The parent binds (port 0 picks a free one), so the URL is known before any worker starts. Once the
service answers, exactly one line `THOTH_URL=http://HOST:PORT` goes to stdout (everything else to
stderr) and the home's `run/service.json` advertises it (`thoth_core.service.advertised`) until exit.
One process: ready when uvicorn has started (its lifespan, which loads the runtime, has run). Several
workers (`--workers N`, each its own app and runtime from `thoth_serve.app:from_environment`): ready
when N distinct worker pids have answered `/v1/health`, or after `READY_TIMEOUT` with those that have.
SIGINT/SIGTERM stop it gracefully: each worker's lifespan ends its sessions and drains its writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from thoth_core.errors import ThothError

from .options import ENV, ServeOptions

APP_FACTORY = "thoth_serve.app:from_environment"
READY_TIMEOUT = 120.0  # seconds the parent waits for every worker to answer
# seconds open requests get at shutdown before they are cancelled: /v1/events streams never end by themselves, and
# turns do not need it (each runs in its own task, which the lifespan waits for, client or not)
GRACE = 3


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to host:port and listening, or a ThothError naming them."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ThothError(f"--host: cannot resolve {host!r}: {exc.strerror}") from exc
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        raise ThothError(f"--port: cannot listen on {host}:{port}: {exc.strerror}") from exc
    listener.set_inheritable(True)
    return listener


def url_of(listener: socket.socket) -> str:
    """`http://HOST:PORT` of a bound socket (IPv6 hosts in brackets)."""
    host, port = listener.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}"


def serve(options: ServeOptions, *, workers: int, home: Path) -> None:
    """Serve until SIGINT/SIGTERM; `home` is the data folder the service is advertised in."""
    import uvicorn

    listener = listen(options.host, options.port)
    url = url_of(listener)
    options = replace(options, port=int(listener.getsockname()[1]))
    os.environ[ENV] = options.to_env()  # the workers' factory reads it (spawned processes inherit it)
    config = uvicorn.Config(
        APP_FACTORY,
        factory=True,
        workers=workers,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=GRACE,
    )
    with contextlib.ExitStack() as advertising:

        def ready() -> None:
            from thoth_core.service import advertised

            advertising.enter_context(advertised(home, url=url, token=options.token))
            click.echo(f"THOTH_URL={url}")
            click.echo(f"thoth serve: {workers} worker(s) at {url} (home {home})", err=True)

        try:
            if workers == 1:
                asyncio.run(serve_one(uvicorn.Server(config), listener, ready))
            else:
                serve_many(config, listener, ready, url=url, token=options.token, workers=workers)
        finally:
            listener.close()


async def serve_one(server: Any, listener: socket.socket, ready: Any) -> None:
    """One process: uvicorn on the bound socket; `ready()` once it has started."""
    with signals_end_serving_only():
        serving = asyncio.ensure_future(server.serve(sockets=[listener]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if server.started:
            ready()
        await serving
    if not server.started:
        raise ThothError("the service did not start (its log above says why)")


def serve_many(config: Any, listener: socket.socket, ready: Any, *, url: str, token: str | None, workers: int) -> None:
    """N worker processes on the shared socket (uvicorn's supervisor); `ready()` once they all answer."""
    from uvicorn.supervisors import Multiprocess

    supervisor = Multiprocess(config, sockets=[listener])
    stop, failed = threading.Event(), threading.Event()

    def watch() -> None:
        if wait_for_workers(url, token=token, workers=workers, stop=stop):
            ready()
        elif not stop.is_set():  # none ever answered (each failed to start, its line above): stop the supervisor
            failed.set()
            os.kill(os.getpid(), signal.SIGTERM)

    watcher = threading.Thread(target=watch, name="thoth-serve-ready", daemon=True)
    watcher.start()
    try:
        supervisor.run()
    finally:
        stop.set()
        watcher.join(5)
    if failed.is_set():
        raise ThothError(f"no worker answered within {READY_TIMEOUT:.0f} s (why: the lines above)")


def wait_for_workers(url: str, *, token: str | None, workers: int, stop: threading.Event) -> bool:
    """Poll /v1/health until `workers` distinct pids answered (or READY_TIMEOUT: True if any did)."""
    seen: set[int] = set()
    until = time.monotonic() + READY_TIMEOUT
    while not stop.is_set() and time.monotonic() < until and len(seen) < workers:
        pid = health_pid(url, token)
        if pid is not None:
            seen.add(pid)
        else:
            stop.wait(0.1)
    return bool(seen) and not stop.is_set()


def health_pid(url: str, token: str | None) -> int | None:
    """The pid of the worker that answered GET /v1/health on a new connection, or None."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host.strip("[]"), int(port), timeout=2)
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        connection.request("GET", "/v1/health", headers=headers)
        response = connection.getresponse()
        if response.status != 200:
            return None
        return int(json.loads(response.read())["pid"])
    except (OSError, ValueError, KeyError, http.client.HTTPException):
        return None
    finally:
        connection.close()


@contextlib.contextmanager
def signals_end_serving_only() -> Iterator[None]:
    """Let SIGINT/SIGTERM stop uvicorn gracefully, and the process exit 0 after the lifespan's shutdown.

    uvicorn re-raises a signal it caught once it has shut down; with these handlers in place that
    re-raise is a no-op.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, lambda *_: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


__all__ = ["APP_FACTORY", "listen", "serve", "url_of", "wait_for_workers"]
