"""The `thoth` command line: thin commands over the runtime; plugins add their own."""

from __future__ import annotations

import asyncio
import atexit
import getpass
import json
import logging
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .config import Config, config_path, load_config, set_value
from .errors import ThothError
from .terminal import PrintableFormatter, guard, printable

if TYPE_CHECKING:
    from .models import Model
    from .runtime import Runtime


class ThothGroup(click.Group):
    """A click group that loads plugin subcommands only when they are asked for, once per invocation."""

    def plugin_commands(self, ctx: click.Context) -> dict[str, click.Command]:
        """Subcommands the installed plugins add, for this invocation's config and environment."""
        if "thoth.plugin_commands" not in ctx.meta:
            from ._calls import call_here
            from .plugins import make_plugin_manager

            group = click.Group()
            ctx.meta["thoth.plugin_commands"] = group.commands
            owners: dict[str, str] = ctx.meta.setdefault("thoth.command_owners", {})
            config = load_config()
            pm = make_plugin_manager(config)
            ctx.meta["thoth.loaded"] = (config, pm)  # runtime() reuses them instead of loading again
            for plugin in dict.fromkeys(pm.implementers("register_cli_commands")):
                call_here(pm, "register_cli_commands", {"cli": group}, only={plugin})
                owners.update({name: plugin for name in group.commands if name not in owners})
        return ctx.meta["thoth.plugin_commands"]  # type: ignore[no-any-return]

    def list_commands(self, ctx: click.Context) -> list[str]:
        try:
            extra = self.plugin_commands(ctx)
        except ThothError:
            extra = {}  # help still lists the built-in commands; running one reports the error
        return sorted({*super().list_commands(ctx), *extra})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return super().get_command(ctx, name) or self.plugin_commands(ctx).get(name)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ThothError as exc:
            from ._calls import tracebacks

            if exc.__cause__ is not None and tracebacks():  # --debug: where a plugin's failure came from
                logging.getLogger("thoth").error("what it came from (--debug):", exc_info=exc.__cause__)
            click.echo(f"thoth: error: {printable(str(exc))}", err=True)
            ctx.exit(2)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:  # a plugin's subcommand failed: one line naming it (the traceback with --debug)
            from ._calls import tracebacks

            owner = ctx.meta.get("thoth.command_owners", {}).get(ctx.invoked_subcommand or "")
            if owner is None or tracebacks():
                raise
            line = " ".join(f"{type(exc).__name__}: {exc}".split())
            click.echo(
                f"thoth: error: plugin {owner}: `thoth {ctx.invoked_subcommand}` failed: {printable(line)}"
                " (--debug shows the traceback)",
                err=True,
            )
            ctx.exit(1)


class HelpGroup(click.Group):
    """A command group that, run without a subcommand, shows its help and exits 0 (not usage and 2)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("invoke_without_command", True)
        super().__init__(*args, **kwargs)
        callback = self.callback

        def then_help(*cb_args: Any, **cb_kwargs: Any) -> Any:
            result = callback(*cb_args, **cb_kwargs) if callback else None
            ctx = click.get_current_context()
            if ctx.invoked_subcommand is None:
                click.echo(ctx.get_help())
            return result

        self.callback = then_help


def runtime() -> Runtime:
    """The runtime for this command, built once from thoth.toml."""
    ctx = click.get_current_context()
    obj = ctx.ensure_object(dict)
    if "runtime" not in obj:
        from .runtime import Runtime

        loaded = ctx.meta.get("thoth.loaded")
        from .database import reachable

        obj["runtime"] = Runtime(reachable(loaded[0]), pm=loaded[1]) if loaded else Runtime.load()
        if obj["runtime"].config.path is None and not os.environ.get("THOTH_HOME"):
            from .home import no_home_hint

            click.echo(f"thoth: {no_home_hint()}", err=True)
    return obj["runtime"]  # type: ignore[no-any-return]


def run(coro: Any) -> Any:
    """Run a coroutine, then let background writes finish and close the runtime."""

    async def whole() -> Any:
        try:
            return await coro
        finally:
            await runtime().aclose()

    return asyncio.run(whole())


UNSAVED_EXIT = 3  # `thoth ask`: the reply was shown, but some layer could not save the turn yet

peer_option = click.option("--peer", default=getpass.getuser, show_default="your user name", help="Who is talking.")
thread_option = click.option("--thread", default="cli", show_default=True, help="Conversation thread.")
workspace_option = click.option("--workspace", default=None, help="Workspace (default from thoth.toml).")


@click.group(cls=ThothGroup)
@click.version_option(package_name="thoth-core")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug).")
@click.option("--debug", is_flag=True, help="Show the traceback of a failing plugin or command.")
def cli(verbose: int, debug: bool) -> None:
    """Thoth: a chat agent with five layers of memory.

    Configuration is the agent home's thoth.toml (the nearest one upwards, or $THOTH_CONFIG); `thoth init DIR`
    makes an agent home. Data lives in the home's .thoth/ folder (or $THOTH_HOME).
    """
    logging.getLogger().setLevel([logging.WARNING, logging.INFO, logging.DEBUG][min(verbose, 2)])
    if debug:
        from ._calls import show_tracebacks

        show_tracebacks()
    sys.stdout = guard(sys.stdout)  # what every command shows: no escape sequences from the model or memory


@cli.command()
@peer_option
@click.option("--thread", default=None, help="Conversation thread (default: the one you were last active in).")
@click.option("--frontend", default=None, help="Frontend to start (default: [thoth] frontend, else the TUI).")
def chat(peer: str, thread: str | None, frontend: str | None) -> None:
    """Chat with the agent in the default frontend."""
    from .inputs import check_name

    check_name("peer", peer)  # before a frontend starts (the runtime refuses it too, at the first turn)
    if thread is not None:
        check_name("thread", thread)
    rt = runtime()
    frontends = rt.registry("register_frontends")
    name = frontend or rt.config.get("thoth.frontend") or ("tui" if "tui" in frontends else "repl")
    if name not in frontends:
        raise rt.config.error("thoth.frontend", f"unknown frontend {name!r}; installed: {', '.join(sorted(frontends))}")
    frontends[name](rt, peer=peer, thread=thread)


@cli.command()
@click.argument("message")
@peer_option
@thread_option
@workspace_option
def ask(message: str, peer: str, thread: str, workspace: str | None) -> None:
    """Run one whole turn and print the reply as it streams."""
    if not message.strip():
        raise ThothError("thoth ask: the message is empty; nothing was sent")

    failed_command: list[str] = []

    async def turn() -> None:
        result = await runtime().turn(
            message, peer=peer, thread=thread, workspace=workspace, on_delta=lambda d: click.echo(d, nl=False)
        )
        if result.reply.model == "command":  # slash commands answer at once, without streaming
            if result.reply.error:
                failed_command.append(result.reply.error)
                return
            click.echo(result.reply.text, nl=False)
        click.echo()

    run(turn())
    if failed_command:
        click.echo(f"thoth: error: {printable(failed_command[0])}", err=True)
        sys.exit(1)
    failed = {plugin: error for unsaved in runtime().unsaved for plugin, error in unsaved["failed"].items()}
    if failed:
        from .writes import unsaved_message

        writes = runtime().writes  # closed: where a turn the journal could not take was kept, or why it was lost
        click.echo(f"thoth: error: {unsaved_message(failed, kept_at=writes.kept_at, lost=writes.lost)}", err=True)
        sys.exit(UNSAVED_EXIT)


@cli.command()
@click.argument("message")
@peer_option
@thread_option
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="Blocks, token counts, cuts and the tools offered as JSON.")
def context(message: str, peer: str, thread: str, workspace: str | None, as_json: bool) -> None:
    """Show the context a turn would get, without calling a model."""
    from .tools import offered
    from .types import Turn

    async def gather() -> None:
        rt = runtime()
        session = await rt.session(peer=peer, thread=thread, workspace=workspace)
        turn = Turn(message, peer, thread, session.workspace)
        assembly = await rt.context(turn, session)
        if as_json:
            try:
                model: Model | None = rt.model()
            except ThothError:  # no model configured: what the plugins would offer one
                model = None
            tools = offered(await rt.tools(turn, session, model=model), rt.config)
            click.echo(json.dumps(dict(assembly.as_dict(), offered_tools=tools), indent=2, default=str))
            return
        click.echo(assembly.system or "(no context blocks)")
        click.echo(f"\n-- {assembly.tokens}/{assembly.budget} tokens from {len(assembly.blocks)} blocks", err=True)
        for cut in assembly.cuts:
            click.echo(
                f"-- cut {cut.plugin}/{cut.tag}: {cut.tokens} -> {cut.kept_tokens} tokens ({cut.reason})", err=True
            )
        for call in assembly.calls:
            if call.status != "ok":
                click.echo(f"-- {call.plugin}: {call.status} ({call.error})", err=True)

    run(gather())


@cli.command()
@click.argument("query")
@peer_option
@workspace_option
@click.option("--k", default=8, show_default=True, type=click.IntRange(1, 100), help="How many memories.")
@click.option("--layer", default=None, help="Only this layer's (or plugin's) memories, e.g. identity.")
@click.option("--json", "as_json", is_flag=True, help="The hits, why each matched and which plugins failed, as JSON.")
def recall(query: str, peer: str, workspace: str | None, k: int, layer: str | None, as_json: bool) -> None:
    """Recall what every layer remembers of a peer matching QUERY, with why.

    Every layer is searched by meaning and by words; the hits come in one list (docs/recall.md).
    A layer that could not answer is logged (one line on stderr, naming it) and the exit code is 1.
    """
    from .recall import answer_lines

    async def go() -> list[dict[str, Any]]:
        found = (await runtime().recall(query=query, peer=peer, workspace=workspace, limit=k, layer=layer)).as_dict()
        click.echo(json.dumps(found, indent=2, default=str) if as_json else "\n".join(answer_lines(found)))
        return list(found["failed"])

    if run(go()):
        sys.exit(1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def plugins(as_json: bool) -> None:
    """List every plugin: distribution, version, hooks, enabled."""
    from .plugins import make_plugin_manager

    pm = make_plugin_manager(load_config())
    rows = []
    for name, info in sorted(pm.info.items()):
        plugin = pm.get_plugin(name)
        hooks = sorted(caller.name for caller in pm.get_hookcallers(plugin) or []) if plugin else []
        rows.append(dict(asdict(info), hooks=hooks))
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    table = [("NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS (or what is wrong)")]
    for row in rows:
        status = "enabled" if row["enabled"] else "disabled" if not row["error"] else "failed"
        status = "missing" if (row["error"] or "").startswith("not installed") else status
        last = row["error"] or ", ".join(row["hooks"])
        table.append((row["name"], row["distribution"], row["version"], status, last))
    widths = [max(len(line[column]) for line in table) for column in range(4)]
    for line in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=False)) + f"  {line[4]}")


@cli.group(cls=HelpGroup)
def config() -> None:
    """Read or change thoth.toml."""


@config.command("get")
@click.argument("key")
def config_get(key: str) -> None:
    """Print the value of a dotted KEY (the defaults of core and plugins included)."""
    from .plugins import make_plugin_manager

    loaded = load_config()
    loaded.declare(make_plugin_manager(loaded).get_plugins())
    value = loaded.get(key)
    if value is None:
        raise ThothError(f"{config_path()}: {key}: not set, and no default")
    click.echo(json.dumps(value) if not isinstance(value, str) else value)


@config.command("set")
@click.argument("key")
@click.argument("value")
def config_set(key: str, value: str) -> None:
    """Set a dotted KEY to VALUE (parsed as TOML when it parses, else a string).

    Comments and layout are kept. Secrets only as references:
    thoth config set models.anthropic.api_key '{ "$env" = "ANTHROPIC_API_KEY" }'
    """
    path = config_path()
    if not path.exists() and not os.environ.get("THOTH_CONFIG"):
        from .home import no_home_hint

        raise ThothError(no_home_hint(running=False))
    stored = set_value(path, key, value, check=lambda candidate: check_as_start_up(candidate, key))
    click.echo(f"{path}: {key} = {json.dumps(stored)}")


def check_as_start_up(candidate: Config, key: str) -> None:
    """Refuse what start-up would refuse: a table of no installed plugin, a key or value the plugins refuse."""
    import difflib
    from importlib.metadata import entry_points

    from .manager import GROUP
    from .plugins import DEFAULT_PLUGINS, make_plugin_manager
    from .runtime import Runtime

    section, *rest = key.split(".")
    if section == "plugins" and rest and rest[0] != "disabled":
        installed = sorted({entry.name for entry in entry_points(group=GROUP)} | set(DEFAULT_PLUGINS))
        if rest[0] not in installed:
            close = difflib.get_close_matches(rest[0], installed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise candidate.error(
                f"plugins.{rest[0]}",
                f"no installed plugin is named {rest[0]!r}; {hint}installed: {', '.join(installed)}",
            )
    made = Runtime(candidate, pm=make_plugin_manager(candidate))  # each plugin's configure checks its table
    asyncio.run(made.aclose())


@cli.command()
@click.option("--peer", required=True, help="The peer whose data is deleted.")
@click.option("--thread", default=None, help="Only this thread.")
@workspace_option
@click.option("--json", "as_json", is_flag=True, help="The receipt as JSON.")
@click.option("--wait", is_flag=True, help="Wait until remote queues (Honcho) have deleted it all; final counts.")
@click.option("--wait-timeout", default=120.0, show_default=True, help="Seconds --wait waits at most.")
def forget(
    peer: str, thread: str | None, workspace: str | None, as_json: bool, wait: bool, wait_timeout: float
) -> None:
    """Delete what every layer holds about a peer, and print a receipt."""
    receipt = run(runtime().forget(peer=peer, thread=thread, workspace=workspace, wait=wait_timeout if wait else 0.0))
    if as_json:
        click.echo(json.dumps(receipt, indent=2))
        return
    scope = f"peer {peer}" + (f", thread {thread}" if thread else "")
    click.echo(f"Forgot {scope}:")
    for plugin, counts in sorted(receipt.items()):
        click.echo(f"  {plugin}: " + ", ".join(f"{n} {what}" for what, n in counts.items()))
    if not receipt:
        click.echo("  nothing was held")


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path), default=".")
def init(directory: Path) -> None:
    """Make DIRECTORY (default: here) an agent home, a git repository."""
    from .home import init_home
    from .plugins import make_plugin_manager

    report = init_home(directory, make_plugin_manager(Config()))
    for name in report.written:
        click.echo(f"  wrote {name}")
    if not report.written:
        click.echo(f"{report.root} is already an agent home; nothing was missing.")
        return
    history = f"committed {report.commit[:10]}" if report.commit else "not committed (git failed; see above)"
    click.echo(f"Agent home ready at {report.root} ({history}).")
    click.echo(f"Next: cd {directory} && thoth doctor && thoth chat")


@cli.command()
def doctor() -> None:
    """Check config, plugins, storage and the model, and say what is wrong."""
    from .doctor import diagnose

    problems = run(diagnose(runtime(), echo=click.echo))
    if problems:
        click.echo(f"{problems} problem(s) found.")
        sys.exit(1)
    click.echo("All checks passed.")


@cli.group(cls=HelpGroup)
def bundle() -> None:
    """Move an agent between machines: all its memory and files in one .tar.gz."""


@bundle.command("export")
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
def bundle_export(path: Path) -> None:
    """Write every layer's records and the home's files to PATH (.tar.gz)."""
    from .bundle import export_bundle, plan_export

    async def go() -> dict[str, Any]:
        rt = runtime()
        await rt.drain()  # turns still being written belong in the bundle
        plan = await asyncio.to_thread(plan_export, rt, path)
        with click.progressbar(length=plan.work, label="exporting", file=sys.stderr) as bar:
            return await asyncio.to_thread(export_bundle, rt, path, plan=plan, progress=bar.update)

    manifest = run(go())
    counts = ", ".join(f"{name} {s['records']}" for name, s in manifest["sections"].items()) or "no records"
    click.echo(f"wrote {path}: {counts}; {len(manifest['files'])} files (bundle version {manifest['version']})")


@bundle.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--merge", is_flag=True, help="Add to a home that holds memory already (known records are skipped).")
def bundle_import(path: Path, merge: bool) -> None:
    """Load a bundle from `thoth bundle export` into this (fresh) agent home."""
    from .bundle import Limits, ensure_fresh, import_bundle, import_work, open_bundle

    opened = open_bundle(path, limits=Limits.of(load_config()))  # checked before the runtime writes anything

    async def go() -> Any:
        try:
            if not merge:
                await asyncio.to_thread(ensure_fresh, runtime())
            with click.progressbar(length=import_work(opened), label="importing", file=sys.stderr) as bar:
                return await asyncio.to_thread(import_bundle, runtime(), opened, merge=merge, progress=bar.update)
        finally:
            opened.close()

    report = run(go())
    for name, added in report.added.items():
        click.echo(f"  {name}: " + (", ".join(f"{n} {what}" for what, n in added.items()) or "nothing new"))
    click.echo(f"  files: {len(report.written)} written, {len(report.unchanged)} unchanged")
    for relative in report.kept:
        click.echo(f"  kept {relative} (differs from the bundle's copy; --merge keeps the home's)")
    for name, n in report.unread.items():
        click.echo(f"thoth: error: section {name} ({n} records) not imported: no enabled plugin reads it", err=True)
    if report.unread:
        sys.exit(1)


@cli.group(cls=HelpGroup)
def storage() -> None:
    """Where layers keep their state: SQLite files, or one shared PostgreSQL."""


@storage.command("migrate")
@click.option("--merge", is_flag=True, help="Add to a PostgreSQL that holds memory already (known ones skipped).")
def storage_migrate(merge: bool) -> None:
    """Copy this embedded home's memory into the PostgreSQL named by $THOTH_STORAGE_URL.

    It exports a bundle from the SQLite files and imports it with the shared store, each in a
    process of its own; the SQLite files stay as they are (a backup). Then set `[storage] url`.
    """
    from .database import URL_ENV

    url = os.environ.get(URL_ENV, "")
    if not url:
        raise click.UsageError(f"set ${URL_ENV} to the postgresql:// URL to copy this home's memory into")
    embedded = {name: value for name, value in os.environ.items() if name != URL_ENV}
    if load_config().get("storage.url"):
        raise ThothError("this home already uses a shared store (storage.url); migrate runs from an embedded home")
    with tempfile.TemporaryDirectory(prefix="thoth-migrate-") as folder:
        bundle = str(Path(folder) / "home.tar.gz")
        steps = [(["bundle", "export", bundle], embedded), (["bundle", "import", bundle, *(["--merge"] * merge)], None)]
        for args, env in steps:
            done = subprocess.run([sys.executable, "-m", "thoth_core.cli", *args], env=env, check=False)
            if done.returncode:
                sys.exit(done.returncode)
    setting = f'\'{{ "$env" = "{URL_ENV}" }}\''
    click.echo(f"Done. Now: thoth config set storage.url {setting} (and start each worker with ${URL_ENV} set)")


_exit_status = [1]  # what the process exits with, once `main` knows it


def _python_status(code: object) -> int:
    """The status Python gives `sys.exit(code)`: None is 0, an int itself, anything else (a message) 1."""
    return 0 if code is None else code if isinstance(code, int) else 1


def _end_before_finalizing() -> None:
    """The last exit step: flush, then leave without finalizing the interpreter (see `main`)."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
            pass
    os._exit(_exit_status[0])


def main() -> None:
    """Entry point of the `thoth` console script.

    The process ends after every normal exit step (the runtime closed, non-daemon threads joined,
    the other atexit callbacks run, output flushed) but before Python finalizes: Python 3.11 ends
    a daemon thread that wakes during finalization with pthread_exit, and that aborts the process
    (exit 134) when the thread's stack holds Rust or C++ frames (pydantic-core, ONNX Runtime,
    tokenizers). Such threads are by design (a plugin call past its deadline is left running in
    one); the exit code is the one Python would have used.
    """
    atexit.register(_end_before_finalizing)  # registered first in this process's run, so it runs last
    from .cli_imports import SDK_TYPES, defer_reexports

    defer_reexports(*SDK_TYPES)  # this process only: a Runtime() in another program leaves imports alone
    # before click resolves a plugin subcommand (which loads the plugins, and may warn); -v lowers the level
    logging.basicConfig(level=logging.WARNING, format="thoth: %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:  # log lines quote exceptions, which may quote the model
        handler.setFormatter(PrintableFormatter(handler.formatter))
    try:
        cli(prog_name="thoth")
    except ThothError as exc:  # raised while building the command list
        click.echo(f"thoth: error: {printable(str(exc))}", err=True)
        _exit_status[0] = 2
        sys.exit(2)
    except SystemExit as exc:
        _exit_status[0] = _python_status(exc.code)
        raise
    except KeyboardInterrupt:
        _exit_status[0] = 130
        raise
    _exit_status[0] = 0


if __name__ == "__main__":
    main()


__all__ = ["HelpGroup", "cli", "main", "run", "runtime"]
