"""The `thoth` command's thin paths: when a service runs for this home, some commands are its clients.

This is the console script's entry point. Before anything heavy is imported (click, the config
validation, the plugins, the runtime, the embedder), it looks for the home's service
(`thoth_core.service.find_service`: one stat, one small file) and, when one runs, lets the
command's thin client answer through its HTTP API: `thoth ask` (turns, streamed), `thoth context`
(here), and the plugins' commands named in the advertisement's `thin` table (entry point group
`thoth.thin`: `recall`, `mcp`, `claude-code`). A thin client gives the same output and exit code
as the command in-process; it returns None for anything it does not handle exactly (an option it
does not know, --help, a slash command), and any failure to reach the service in time
(`ServiceUnavailable`) runs the command in-process instead, unless the request may already have
done its work there (a turn sent: then one error line, never the turn twice).
`THOTH_NO_SERVICE=1` always runs in-process.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module

from .service import Service, ServiceError, ServiceUnavailable, find_service, quote, urlencode

ThinClient = Callable[[Service, list[str]], "int | None"]
Parsed = tuple[list[str], dict[str, str | bool]]

CONFIG_NAME = "thoth.toml"  # as thoth_core.config (not imported here: it validates, and imports the types)
TURN_WAIT = 600.0  # seconds a sent turn may take to its first event (the model's first token); never re-run
CONTEXT_WAIT = 10.0  # seconds for a context or recall answer (the service answered its health check just before)
OFF_SWITCHES = ("THOTH_NO_SERVICE", "THOTH_AGENT", "THOTH_LOAD_PLUGINS")  # set: the service may not be this process


def config_file() -> str | None:
    """The config file the command would read: `$THOTH_CONFIG`, else the nearest `thoth.toml` upwards."""
    if os.environ.get("THOTH_CONFIG"):
        named = os.environ["THOTH_CONFIG"]
        return named if os.path.isfile(named) else None
    folder = os.path.realpath(os.getcwd())
    while True:
        candidate = os.path.join(folder, CONFIG_NAME)
        if os.path.isfile(candidate):
            return candidate
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def data_home() -> str | None:
    """The data home a service of this config is advertised in (`default_home`), or None to decide in-process."""
    if os.environ.get("THOTH_HOME"):
        return os.path.expanduser(os.environ["THOTH_HOME"])
    path = config_file()
    if path is None:
        return None  # the per-user app dir: the command in-process also says there is no agent home
    try:
        with open(path, encoding="utf-8") as config:
            home = home_setting(config.read())
    except (OSError, UnicodeDecodeError):
        return None  # in-process reports the file's problem in its own words
    return os.path.expanduser(os.path.join(os.path.realpath(os.path.dirname(path)), home)) if home else None


def home_setting(text: str) -> str | None:
    """`[thoth] home` of a config file's text when it is written plainly (`home = "..."`), else None.

    Not `tomllib`: with the `re` and `typing` it imports it costs a hook process about 10 ms of its
    80. Anything this line reading is not sure of (a multi-line string, a dotted, quoted or inline
    `thoth` or `home` key, an escape, a second `home`) gives None and the command runs in-process,
    where the file is parsed.
    """
    if '"""' in text or "'''" in text:
        return None
    table, found = "", None
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("["):
            table = "[[" if line.startswith("[[") else line.partition("]")[0][1:].strip()
            continue
        key, equals, value = (part.strip() for part in line.partition("="))
        if not equals or line.startswith("#"):
            continue  # blank, a comment, or an array's continuation line
        if (table == "" and key.split(".")[0].strip("\"' ") == "thoth") or (table == "thoth" and "home" in key):
            if key != "home" or table != "thoth":
                return None  # `thoth.home = ...`, `thoth = {...}`, `"home" = ...`: in-process decides
            mark = value[:1]
            closing = value.find(mark, 1) if mark in ('"', "'") else -1
            rest = value[closing + 1 :].strip()
            if closing < 0 or "\\" in value or found is not None or not (rest == "" or rest.startswith("#")):
                return None
            found = value[1:closing]
    return found


def user_name() -> str:
    """The login name, as `getpass.getuser()` finds it (its module costs the hook process an import)."""
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        if os.environ.get(name):
            return os.environ[name]
    import pwd

    return pwd.getpwuid(os.getuid()).pw_name


def parse_args(
    args: Sequence[str], *, values: Sequence[str] = (), flags: Sequence[str] = (), positional: int
) -> Parsed | None:
    """Options and arguments as click would read them, or None for anything else (click then says what is wrong)."""
    found: list[str] = []
    options: dict[str, str | bool] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg == "--":
            found += rest
            break
        name, equals, value = arg.partition("=")
        if name in values:
            if not equals:
                if not rest:
                    return None
                value = rest.pop(0)
            options[name] = value
        elif arg in flags:
            options[arg] = True
        elif arg.startswith("-") and arg != "-":
            return None
        else:
            found.append(arg)
    return (found, options) if len(found) == positional else None


def peer_path(peer: str, tail: str, workspace: str | bool | None) -> str:
    """`/v1/peers/PEER/TAIL`, with the workspace query when one is named."""
    query = f"?{urlencode({'workspace': workspace})}" if isinstance(workspace, str) else ""
    return f"/v1/peers/{quote(peer, safe='')}/{tail}{query}"


def write(text: str, *, err: bool = False) -> None:
    """Text to stdout (or stderr) as `click.echo` would show it: escape sequences made printable, flushed."""
    from .terminal import guard

    stream = guard(sys.stderr if err else sys.stdout)
    stream.write(text)
    stream.flush()


def error_line(message: str) -> None:
    """`thoth: error: MESSAGE` on stderr, as the command in-process prints a ThothError."""
    from .terminal import printable

    write(f"thoth: error: {printable(message)}\n", err=True)


def ask(service: Service, args: list[str]) -> int | None:
    """`thoth ask MESSAGE`: one turn through the service, the reply printed as it streams."""
    parsed = parse_args(args, values=("--peer", "--thread", "--workspace"), positional=1)
    if parsed is None:
        return None
    (message,), options = parsed
    if not message.strip() or message.lstrip().startswith("/"):
        return None  # an empty message or a slash command: the command in-process answers it in its own words
    peer = str(options.get("--peer") or user_name())
    body = {"text": message, "thread": str(options.get("--thread", "cli")), "saved": True}
    service.get("/v1/health")  # a hung service is found out here, before the turn is sent
    shown = answered = False
    try:
        for event, data in service.events(peer_path(peer, "turns", options.get("--workspace")), body, wait=TURN_WAIT):
            if event == "delta":
                write(str(data.get("text", "")))
                shown = True
            elif event == "done":
                if data.get("model") == "command" and not shown:
                    write(str(data.get("reply", "")))
                write("\n")
                answered = True
            elif event == "saved" and answered:  # as in-process: a turn some layer could not save exits 3
                if data.get("message"):
                    error_line(str(data["message"]))
                    return 3
                return 0
            elif event == "error":
                error_line(str(data.get("error", "the turn failed")))
                return 2
    except ServiceUnavailable as exc:
        if not exc.sent:
            raise
        if answered:
            error_line(f"the service stopped before saying whether the turn was saved ({exc})")
            return 3
        error_line(f"the service stopped answering during the turn ({exc}); it may still keep the turn")
        return 2
    if answered:  # a service that does not tell
        return 0
    error_line("the service ended the turn's stream without its reply")
    return 2


def context(service: Service, args: list[str]) -> int | None:
    """`thoth context MESSAGE [--json]`: the context a turn would get, assembled by the service."""
    parsed = parse_args(args, values=("--peer", "--thread", "--workspace"), flags=("--json",), positional=1)
    if parsed is None:
        return None
    (message,), options = parsed
    peer = str(options.get("--peer") or user_name())
    body = {"message": message, "thread": str(options.get("--thread", "cli"))}
    service.get("/v1/health")  # a hung service is found out here, within the connect timeout
    found = service.post(peer_path(peer, "context", options.get("--workspace")), body, wait=CONTEXT_WAIT)
    if options.get("--json"):
        write(json.dumps({key: found[key] for key in ("blocks", "cut", "calls", "tokens", "budget")}, indent=2) + "\n")
        return 0
    if not isinstance(found.get("system"), str):
        return None  # a service without the rendered prompt: in-process renders it
    write((found["system"] or "(no context blocks)") + "\n")
    lines = [f"\n-- {found['tokens']}/{found['budget']} tokens from {len(found['blocks'])} blocks"]
    lines += [
        f"-- cut {c['plugin']}/{c['tag']}: {c['tokens']} -> {c['kept_tokens']} tokens ({c['reason']})"
        for c in found["cut"]
    ]
    lines += [f"-- {c['plugin']}: {c['status']} ({c['error']})" for c in found["calls"] if c["status"] != "ok"]
    write("".join(line + "\n" for line in lines), err=True)
    return 0


def recall(service: Service, args: list[str]) -> int | None:
    """`thoth recall QUERY [--peer P] [--k N] [--layer L]`: every layer's hits, fused by the service."""
    parsed = parse_args(args, values=("--peer", "--workspace", "--k", "--layer"), positional=1)
    if parsed is None:
        return None
    (query,), options = parsed
    k = str(options.get("--k", "8"))
    if not query.strip() or not k.isdigit() or not 1 <= int(k) <= 100:
        return None  # click says what is wrong, in-process
    peer = str(options.get("--peer") or user_name())
    service.get("/v1/health")  # a hung service is found out here, within the connect timeout
    path = f"/v1/peers/{quote(peer, safe='')}/recall"
    found = service.get(
        path, wait=CONTEXT_WAIT, q=query, k=k, workspace=options.get("--workspace"), layer=options.get("--layer")
    )
    from .recall import answer_lines, failure_line

    write("\n".join(answer_lines(found)) + "\n")
    for failed in found["failed"]:
        error_line(failure_line(failed))
    return 1 if found["failed"] else 0


CORE_CLIENTS: dict[str, ThinClient] = {"ask": ask, "context": context, "recall": recall}
IN_PROCESS_ONLY = frozenset({"bundle", "chat", "config", "doctor", "forget", "init", "plugins", "serve", "storage"})


def client_for(service: Service, command: str) -> ThinClient | None:
    """The thin client of a command: the core's own, else the one the service's plugins advertise."""
    if command in CORE_CLIENTS:
        return CORE_CLIENTS[command]
    target = service.thin.get(command)
    if not target:
        return None
    module, _, function = target.partition(":")
    try:
        found = getattr(import_module(module), function)
    except (ImportError, AttributeError):
        return None  # installed in the service's environment only: in-process says what is missing
    return found  # type: ignore[no-any-return]


def run_thin(argv: Sequence[str]) -> int | None:
    """The exit code of the command run as a client of the home's service, or None to run it in-process."""
    if not argv or argv[0].startswith("-") or argv[0] in IN_PROCESS_ONLY:
        return None  # decided without reading a file: `thoth --help`, `thoth init` cost what they did
    if any(os.environ.get(switch) for switch in OFF_SWITCHES):
        return None
    home = data_home()
    service = find_service(home) if home is not None else None
    client = client_for(service, argv[0]) if service is not None else None
    if service is None or client is None:
        return None
    try:
        return client(service, list(argv[1:]))
    except (ServiceUnavailable, ServiceError):  # not reached in time, or refused before doing anything
        return None


def main() -> None:
    """Entry point of the `thoth` console script: a thin client when the home's service runs, else the whole CLI."""
    code = run_thin(sys.argv[1:])
    if code is None:
        from .cli import main as whole

        whole()
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be written anyway
            pass
    sys.exit(code)


__all__ = [
    "CONTEXT_WAIT",
    "TURN_WAIT",
    "ask",
    "config_file",
    "context",
    "data_home",
    "error_line",
    "main",
    "parse_args",
    "peer_path",
    "recall",
    "run_thin",
    "write",
]
