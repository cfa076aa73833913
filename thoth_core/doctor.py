"""`thoth doctor`: check config, plugins, storage and the model; report what is wrong.

Each line is `ok`, `BAD` (a problem: counted, the exit status says so) or `WARN` (worth knowing, not a
failure), e.g. state a plugin keeps on this host only while the home shares a store (`[storage] url`).
A plugin's fault is the same one line `thoth plugins` and `thoth context --json` show: failed to load
(wrong signature, import error), a slash command refused, or its context hook on a probe turn (of a
session no hook was told about) raised, timed out, blocked the event loop or returned the wrong type.
"""

from __future__ import annotations

import inspect
import os
import tempfile
from collections.abc import Callable
from typing import TYPE_CHECKING

from .config import ESSENTIAL
from .errors import ThothError
from .home import no_home_hint
from .plugins import install_hint
from .types import PluginCall, Session, Turn

PROBE = "thoth-doctor"  # the peer and thread of the probe turn

if TYPE_CHECKING:
    from .runtime import Runtime


async def diagnose(runtime: Runtime, *, echo: Callable[[str], None]) -> int:
    """Print one line per check; returns how many failed."""
    problems = 0

    def report(ok: bool | None, what: str) -> None:  # None: a warning, not counted as a problem
        nonlocal problems
        problems += ok is False
        echo(f"{'ok ' if ok else 'BAD' if ok is False else 'WARN'} {what}")

    hint = "" if runtime.config.path or os.environ.get("THOTH_HOME") else f" ({no_home_hint()})"
    report(True, f"config: {runtime.config.source if runtime.config.path else 'no thoth.toml, using defaults'}{hint}")
    infos = runtime.pm.info
    for name, info in sorted(infos.items()):
        if info.error:
            if info.error.startswith("not installed"):
                report(False, f"plugin {name} is named in {runtime.config.source} but {info.error}")
            else:
                report(False, f"plugin {name}: failed to load: {info.error}")
    _ = runtime.commands  # registering them checks each handler
    for command, problem in sorted(runtime.command_problems.items()):
        report(False, f"plugin {command} refused: {problem}")
    for name in sorted(ESSENTIAL):
        loaded = runtime.pm.has_plugin(name)
        hint = " or add it to THOTH_LOAD_PLUGINS" if os.environ.get("THOTH_LOAD_PLUGINS") is not None else ""
        state = "loaded" if loaded else f"is not loaded: {install_hint(name)}{hint}"
        report(loaded, f"plugin {name} (essential) {state}")
    try:
        with tempfile.NamedTemporaryFile(dir=runtime.home):
            pass
        report(True, f"storage: {runtime.home} is writable")
    except OSError as exc:
        report(False, f"storage: {runtime.home} is not writable: {exc}")
    report(*shared_store(runtime))
    for call in await probe_context(runtime):  # a timeout may be a busy machine or a cold start: a warning
        verdict = True if call.status == "ok" else None if call.status == "timeout" else False
        report(verdict, f"plugin {call.plugin}: {call.hook} {call.status}" + (f": {call.error}" if call.error else ""))
    for plugin, checks, call in await runtime.call("doctor_checks", runtime=runtime):
        if call.status != "ok":
            report(False, f"plugin {plugin}: its checks failed: {call.error}")
        for ok, what in checks or []:
            report(None if ok is None else bool(ok), what)
    try:
        model = runtime.model()
        check = getattr(model, "check", None)
        detail = ""
        if check is not None:
            detail = check()
            if inspect.isawaitable(detail):
                detail = await detail
        report(True, f"model: {model.name} {detail or 'configured'}")
    except ThothError as exc:
        report(False, f"model: {exc}")
    except Exception as exc:  # noqa: BLE001 - doctor reports, never crashes
        report(False, f"model: unreachable: {type(exc).__name__}: {exc}")
    return problems


async def probe_context(runtime: Runtime) -> list[PluginCall]:
    """How each plugin's `pre_spawn_context` went on a probe turn, in a session no `session_start` was told about."""
    workspace = str(runtime.config.get("thoth.workspace"))
    session = Session(workspace, PROBE, PROBE, home=runtime.home, runtime=runtime)
    session.started.set()
    assembly = await runtime.context(Turn("thoth doctor", PROBE, PROBE, workspace), session)
    return sorted(assembly.calls, key=lambda call: call.plugin)


def shared_store(runtime: Runtime) -> tuple[bool, str]:
    """Whether the shared PostgreSQL (`[storage] url`) answers, or that the layers use SQLite files."""
    from .database import storage_url

    try:
        url = storage_url(runtime.config)
    except ThothError as exc:
        return False, f"storage: {exc}"
    if url is None:
        return True, f"storage: SQLite files in {runtime.home} (embedded; set [storage] url to share one PostgreSQL)"
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as db:
            row = db.execute("SHOW server_version").fetchone()
            version = row[0] if row else "?"
        return True, f"storage: shared PostgreSQL {version} answers"
    except ImportError:
        return False, "storage: storage.url needs psycopg: pip install 'thoth-core[postgres]'"
    except Exception as exc:  # noqa: BLE001 - any failure to connect is the finding
        return False, f"storage: the shared PostgreSQL does not answer: {str(exc).splitlines()[0][:160]}"
