"""`thoth serve` for a bench: started in an agent home on an ephemeral port, stopped at the end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

THOTH = Path(sys.executable).with_name("thoth")


@contextmanager
def service_running(cwd: Path, env: dict[str, str], *, ready_within: float = 180.0) -> Iterator[str]:
    """`thoth serve --port 0` in cwd with env; yields its URL once it printed `THOTH_URL=` (and advertised itself)."""
    process = subprocess.Popen(
        [str(THOTH), "serve", "--port", "0"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + ready_within
        line = ""
        while time.monotonic() < deadline and not line.startswith("THOTH_URL="):
            line = process.stdout.readline()
            if not line and process.poll() is not None:
                raise RuntimeError(f"thoth serve exited with {process.returncode} before it was ready")
        if not line.startswith("THOTH_URL="):
            raise RuntimeError(f"thoth serve printed no THOTH_URL line within {ready_within} s")
        yield line.strip().partition("=")[2]
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
