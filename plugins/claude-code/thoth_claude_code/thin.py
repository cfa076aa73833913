"""`thoth claude-code hook EVENT` as a client of the home's running service (`thoth serve`): the warm path.

Claude Code waits for each hook's process; loaded in-process, the runtime and the embedder cost most
of a second. When a service runs, the hook process imports only the standard library and
`thoth_core.service`, sends the hook's stdin to the service's `/claude-code/hook/EVENT` route (see
`warm.py`, registered through `serve_routes`) with the process's age, so the budget still counts
from Claude Code's start of the process, and prints what the service answers: the same output, the
same stderr line, exit code 0. When the service cannot be reached in time, stdin is put back and the
command runs in-process (a Stop or SessionEnd recorded twice is prevented by the ledger's claims).
"""

from __future__ import annotations

import io
import os
import sys
import time

from thoth_core.service import Service, ServiceError, ServiceUnavailable

NAME = "claude-code"  # as settings.NAME (not imported: settings imports the config)
ROUTE = "/claude-code/hook/"
START_UP_AT_MOST = 5.0  # seconds: an older process start is a clock oddity, not Python's start-up
CONTEXT_WAIT = 2.0  # seconds a context hook waits for the service (its budget, 1.5 s by default, is the service's)
RECORD_WAIT = 30.0  # seconds Stop and SessionEnd wait, after a health check, before recording in-process (the ledger
# claims each turn, so a Stop the service was still doing is not recorded twice)


def process_started() -> float:
    """When this hook's process started, on the `time.monotonic()` clock (from /proc on Linux; elsewhere: now)."""
    if sys.argv[1:3] != [NAME, "hook"]:
        return time.monotonic()  # run inside another program (tests, a host): its start-up is not the hook's
    try:
        with open("/proc/self/stat") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22: since boot
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.monotonic()
    return time.monotonic() - age if 0 <= age < START_UP_AT_MOST else time.monotonic()


def main(service: Service, args: list[str]) -> int | None:
    """`thoth claude-code hook EVENT [--wait]` through the service; None for the other subcommands (in-process)."""
    if len(args) not in (2, 3) or args[0] != "hook" or args[1].startswith("-") or args[2:] not in ([], ["--wait"]):
        return None
    event, wait = args[1], args[2:] == ["--wait"]
    started = process_started()
    stdin = sys.stdin.read()
    body = {"stdin": stdin, "age": time.monotonic() - started, "wait": wait}
    context = event in ("SessionStart", "UserPromptSubmit")
    try:
        if not context:
            service.get("/v1/health")  # a hung service is found out within the connect timeout, not RECORD_WAIT
        answer = service.post(ROUTE + event, body, wait=CONTEXT_WAIT if context else RECORD_WAIT)
    except (ServiceUnavailable, ServiceError):
        sys.stdin = io.StringIO(stdin)  # the command in-process reads the same hook input
        raise
    output, error, warning = answer.get("output"), answer.get("error"), answer.get("warning")
    if isinstance(warning, str) and warning:  # the line the in-process hook logs
        sys.stderr.write(f"thoth: WARNING thoth_claude_code.commands: {warning}\n")
    if isinstance(output, str) and output:
        sys.stdout.write(output + "\n")  # ASCII JSON (json.dumps' default): nothing for the CLI's guard to change
    if isinstance(error, str) and error:
        sys.stderr.write(f"thoth claude-code hook {event}: {error}\n")
    return 0


__all__ = ["main", "process_started"]
