"""The invariant test's world: an agent home made by `thoth init`, its fakes, its faults, and what it holds.

`World` starts a fake Anthropic (streaming, scripted by the messages themselves) and a fake
Honcho on 127.0.0.1, makes an agent home in a temp dir with the identity layer on Honcho and the
episodic ANN index forced on, and runs steps: in a long-lived driver child (`driver.py`) where
no kill is needed, as `thoth ...` subprocesses where one is. Every user message carries a
marker word (`zq...`), its scripted reply another (`ry...`), so what each layer keeps can be
found in stores and raw bytes. `Ledger` is the model: what must be kept, what was forgotten,
what was approved; `check_*` compare an `Observation` with it and return the broken promises.

Faults: a full disk and a read-only data folder are a tmpfs mounted on the home's `.thoth`
(filled to the last byte; remounted read-only), which needs root and `mount`; without them
the disk-full fault is a child limited with RLIMIT_FSIZE and the read-only one is skipped.
PostgreSQL is stopped and started with its own `pg_ctl`; Honcho hangs or goes down (its port
closed) through `FakeHoncho`.
"""

from __future__ import annotations

import json
import os
import re
import resource
import select
import shutil
import signal
import sqlite3
import subprocess
import sys
import tarfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thoth_core.testing.fake_anthropic import FakeAnthropic, forced_tool, last_user_text

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
THOTH = str(Path(sys.executable).with_name("thoth"))
MARKER = re.compile(r"\b(?:zq|ry|pz|nq)[a-z]{8}\b")
ABORTS = {134, 139, -6, -11, -7, -4}  # SIGABRT / SIGSEGV / SIGBUS / SIGILL, as a shell or Python reports them
REPLY_WORDS = "alpha bravo charlie delta echo foxtrot golf hotel india juliet".split()
LETTERS = "abcdefghijklmnopqrstuvwxyz"
RUNS: dict[str, Summary] = {}  # backend -> what its runs did, for the terminal summary


def word(prefix: str, number: int) -> str:
    """A marker word: the prefix and eight letters spelling the number (unique, no digits to redact)."""
    letters = ""
    for _ in range(8):
        number, digit = divmod(number, 26)
        letters += LETTERS[digit]
    return prefix + letters


@dataclass
class Message:
    """One user message the test sent, and what became of it."""

    marker: str
    peer: str
    thread: str
    agent: str
    reply_marker: str
    accepted: bool = False  # the model was asked (the user's words were taken)
    shown: str = ""  # what the user saw of the reply
    complete: bool = False  # the whole reply was shown
    forgotten: bool = False
    forgotten_with_thread: bool = False  # by `thoth forget --thread`, not the whole peer
    layers: tuple[str, ...] = ("episodic", "working", "identity")  # where it must be kept
    fault: str | None = None  # what happened around it: kill, read-only, disk-full, postgres-down, honcho-*, ...
    vectors: list[bytes] = field(default_factory=list)  # the episode's embedding (float32), captured before forget


@dataclass
class Item:
    """A text reflection proposed about a peer (a note applied at once, or an item waiting for approval)."""

    marker: str
    peer: str
    kind: str  # "note" (applied at once) or "observation" (waits for a person)
    step: int = 0  # the step during which the model proposed it
    decided: bool = False  # a person approved or rejected it
    approved: bool = False
    forgotten: bool = False


@dataclass
class Summary:
    """What one run did: steps, faults and checks, by name."""

    steps: Counter[str] = field(default_factory=Counter)
    faults: Counter[str] = field(default_factory=Counter)
    checks: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: Summary) -> None:
        """Add another run's counts to this one."""
        for name in ("steps", "faults", "checks", "skipped"):
            getattr(self, name).update(getattr(other, name))
        self.failures += other.failures
        self.seconds += other.seconds

    def line(self) -> str:
        """One line for a terminal."""
        total = sum(self.steps.values())
        steps = ", ".join(f"{k} {v}" for k, v in sorted(self.steps.items()))
        faults = ", ".join(f"{k} {v}" for k, v in sorted(self.faults.items())) or "none"
        checks = ", ".join(f"{k} {v}" for k, v in sorted(self.checks.items()))
        return f"{total} steps ({steps}); faults: {faults}; checks: {checks}; {len(self.failures)} failure(s)"

    def as_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "steps": dict(self.steps),
            "faults": dict(self.faults),
            "checks": dict(self.checks),
            "skipped": dict(self.skipped),
            "failures": self.failures,
            "seconds": round(self.seconds, 1),
        }


class Ledger:
    """The model of what the home must hold."""

    def __init__(self) -> None:
        self.messages: dict[str, Message] = {}
        self.items: dict[str, Item] = {}
        self.remembered: dict[str, tuple[str, bool]] = {}  # marker -> (peer, forgotten)
        self.counter = 0
        self.step = 0  # the machine counts its steps here

    def fresh(self, prefix: str) -> str:
        """A new marker word."""
        self.counter += 1
        return word(prefix, self.counter * 7919 + 104729)

    def owner(self, marker: str) -> str | None:
        """The peer a marker belongs to."""
        if marker in self.messages:
            return self.messages[marker].peer
        for message in self.messages.values():
            if message.reply_marker == marker:
                return message.peer
        if marker in self.items:
            return self.items[marker].peer
        if marker in self.remembered:
            return self.remembered[marker][0]
        return None

    def forgotten_markers(self, *, threads: bool = True) -> set[str]:
        """Every marker whose owner (or, with `threads`, thread) was forgotten, except approved items."""
        gone = [m for m in self.messages.values() if m.forgotten and (threads or not m.forgotten_with_thread)]
        out = {m.marker for m in gone} | {m.reply_marker for m in gone}
        out |= {i.marker for i in self.items.values() if i.forgotten and not i.approved}
        out |= {k for k, (_, gone) in self.remembered.items() if gone}
        return out

    def forget(self, peer: str, thread: str | None) -> None:
        """Mark a peer's (or one thread's) messages and items forgotten."""
        for message in self.messages.values():
            if message.peer == peer and (thread is None or message.thread == thread) and not message.forgotten:
                message.forgotten, message.forgotten_with_thread = True, thread is not None
        if thread is None:
            for item in self.items.values():
                if item.peer == peer:
                    item.forgotten = True
            for marker, (owner, _) in list(self.remembered.items()):
                if owner == peer:
                    self.remembered[marker] = (owner, True)


@dataclass
class Observation:
    """What the home holds after recovery, as one driver's `observe` answered."""

    sections: dict[str, list[dict[str, Any]]]
    approvals: list[dict[str, Any]]
    views: dict[str, dict[str, Any]]
    honcho_messages: list[str]
    failed: list[str] = field(default_factory=list)  # hooks that failed while observing (e.g. the approval queue)

    def texts(self, section: str) -> str:
        """A section's records as one JSON text."""
        return json.dumps(self.sections.get(section, []))

    def view_markers(self, peer: str) -> dict[str, set[str]]:
        """The markers a peer's recall and context show."""
        view = self.views.get(peer, {})
        return {part: set(MARKER.findall(" ".join(view.get(part, [])))) for part in ("recall", "context")}


class World:
    """One agent home with its fakes; `close()` undoes everything it started or mounted."""

    def __init__(self, root: Path, *, backend: str = "sqlite", pg_server: Any = None, storage_url: str | None = None):
        self.root = root
        self.backend = backend
        self.pg_server = pg_server
        self.storage_url = storage_url
        self.home = root / "home"
        self.data = self.home / ".thoth"
        self.ledger = Ledger()
        self.summary = Summary()
        self.anthropic = FakeAnthropic().start()
        self.anthropic.replies = self.answer
        self.stream_delay = 0.0
        self.stall = 0.0
        from thoth_identity.fake_honcho import FakeHoncho  # the identity plugin's test server

        self.honcho = FakeHoncho().start()
        self.mounted = False
        self.driver: subprocess.Popen[str] | None = None
        self.env = self._env()
        self._init_home()

    # --- set-up -------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("ANTHROPIC_", "OPENAI_", "HONCHO_", "THOTH_")) and not k.endswith("_DISABLED")
        }
        env.update(ANTHROPIC_BASE_URL=self.anthropic.url, ANTHROPIC_API_KEY="test-key", PYTHONDONTWRITEBYTECODE="1")
        env["THOTH_LOAD_PLUGINS"] = "working,identity,episodic,procedural,reflection,anthropic"
        env["XDG_STATE_HOME"] = str(self.root / "state")  # turns held at exit (a read-only home): never the user's
        return env

    def _init_home(self) -> None:
        done = subprocess.run([THOTH, "init", str(self.home)], env=self.env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        self.data.mkdir(exist_ok=True)
        self.mounted = mount_tmpfs(self.data, "48m")
        episodic = 'ann = "usearch"' if self.backend == "sqlite" else 'ann = "hnsw"\nann_min_rows = 1'
        storage = f'\n[storage]\nurl = "{self.storage_url}"\n' if self.storage_url else ""
        text = (self.home / "thoth.toml").read_text()
        text = text.replace('# model = "anthropic"      ', 'model = "anthropic"        ')
        text = text.replace("founders = []", 'founders = ["founder"]')
        text += f"""
[plugins.episodic]
{episodic}

[plugins.identity]
backend = "honcho"
base_url = "{self.honcho.url}"
write_timeout = 1.0
write_retries = 0
{storage}"""
        (self.home / "thoth.toml").write_text(text)

    # --- the fake model -----------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The fake model's answer: a reply naming the message's marker; JSON for reflection and nightly."""
        tool = forced_tool(body)
        if tool is not None:
            return {"reply": json.dumps(self.structured(tool, json.dumps(body)))}
        text = last_user_text(body)
        found = [m for m in MARKER.findall(text) if m in self.ledger.messages]
        reply = self.ledger.messages[found[-1]].reply_marker if found else "ok"
        return {"reply": f"{reply} " + " ".join(REPLY_WORDS), "delay": self.stream_delay, "stall": self.stall}

    def structured(self, tool: str, request: str) -> dict[str, Any]:
        """Reflection at session end: a note about the session's peer and an observation waiting for approval."""
        if "lines" in tool.lower() or "consolidation" in tool.lower():
            return {"lines": [{"day": time.strftime("%Y-%m-%d"), "text": "nothing new", "sources": []}]}
        owners = [self.ledger.owner(m) for m in MARKER.findall(request)]
        peers = [p for p in owners if p]
        if not peers:
            return {}
        peer = Counter(peers).most_common(1)[0][0]
        note, observation = self.ledger.fresh("nq"), self.ledger.fresh("pz")
        self.ledger.items[note] = Item(note, peer, "note", self.ledger.step)
        self.ledger.items[observation] = Item(observation, peer, "observation", self.ledger.step)
        return {
            "memory_notes": [f"{peer} talked about {note}."],
            "persona_observations": [f"When {peer} asks, mention {observation} first."],
            "user_model_updates": {peer: [f"{peer} likes {note}."]},
        }

    # --- running things -----------------------------------------------------------------

    def _driver(self) -> subprocess.Popen[str]:
        if self.driver is None or self.driver.poll() is not None:
            self.driver = subprocess.Popen(
                [PYTHON, str(HERE / "driver.py")],
                cwd=self.home,
                env=self.env,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                preexec_fn=self._limits,
            )
        return self.driver

    def _limits(self) -> None:
        """In the child: a file size limit when the disk-full fault has no tmpfs to fill."""
        if getattr(self, "fsize_limit", None) is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (self.fsize_limit, self.fsize_limit))

    def call(self, command: str, timeout: float = 180, **args: Any) -> dict[str, Any]:
        """Run one driver command; a driver that died answers {"died": returncode}."""
        driver = self._driver()
        assert driver.stdin is not None and driver.stdout is not None
        try:
            driver.stdin.write(json.dumps({"command": command, **args}) + "\n")
            driver.stdin.flush()
        except BrokenPipeError:
            pass
        ready, _, _ = select.select([driver.stdout], [], [], timeout)
        line = driver.stdout.readline() if ready else ""
        if not line:
            if driver.poll() is None:
                driver.kill()
            code = driver.wait()
            self.driver = None
            return {"died": code, "timed_out": not ready}
        return json.loads(line)

    def restart_driver(self) -> None:
        """A new driver child (e.g. after an outage its module caches would outlive)."""
        if self.driver is not None:
            self.driver.stdin.close()  # type: ignore[union-attr]
            try:
                self.driver.wait(30)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
            self.driver = None

    def thoth(
        self, *args: str, timeout: float = 180, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a `thoth` command in the home."""
        return subprocess.run(
            [THOTH, *args],
            cwd=self.home,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            preexec_fn=self._limits,
        )

    def ask_killed(self, text: str, peer: str, thread: str, agent: str, point: str) -> tuple[str, int]:
        """`thoth ask`, SIGKILLed at a point ("start", "mid-stream", "last-word"); what it showed and its code."""
        self.stream_delay, self.stall = (0.15, 0.0) if point == "mid-stream" else (0.0, 3.0)
        seen = len(self.anthropic.messages_requests)
        child = subprocess.Popen(
            [THOTH, "ask", text, "--peer", peer, "--thread", thread],
            cwd=self.home,
            env={**self.env, "THOTH_AGENT": agent},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            preexec_fn=self._limits,
        )
        assert child.stdout is not None
        shown = b""
        fd = child.stdout.fileno()
        want = {"start": 0, "mid-stream": 3, "last-word": len(REPLY_WORDS) + 1}[point]
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and child.poll() is None:
            if point == "start" and len(self.anthropic.messages_requests) > seen:
                break
            ready, _, _ = select.select([fd], [], [], 0.05)
            if ready:
                chunk = os.read(fd, 4096)
                shown += chunk
                if point != "start" and len(shown.split()) >= want:
                    break
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
        code = child.wait()
        self.stream_delay, self.stall = 0.0, 0.0
        return shown.decode(errors="replace"), code

    # --- observing ----------------------------------------------------------------------

    def observe(self) -> Observation | dict[str, Any]:
        """Recover (as the next runtime start does) and read every layer; a dict when the driver failed."""
        peers = sorted({m.peer for m in self.ledger.messages.values()} | {"alice", "bob"})
        answer = self.call("observe", peers=peers, agents=["default", "scout"])
        if "sections" not in answer:
            return answer
        with self.honcho.lock:
            held = [json.dumps(m) for m in self.honcho.messages] + [
                json.dumps(c) for c in self.honcho.conclusions.values()
            ]
        return Observation(answer["sections"], answer["approvals"], answer["views"], held, answer.get("failed", []))

    def home_files(self) -> list[Path]:
        """Every file of the agent home (data folder, index files, journals and .git included)."""
        return [p for p in self.home.rglob("*") if p.is_file() and not p.is_symlink()]

    def databases(self) -> list[Path]:
        """Every SQLite database of the home."""
        found = []
        for path in self.home_files():
            if ".git" in path.parts:
                continue
            try:
                with path.open("rb") as handle:
                    if handle.read(16) == b"SQLite format 3\x00":
                        found.append(path)
            except OSError:
                continue
        return found

    def episode_vectors(self, peer: str, thread: str | None) -> dict[str, list[bytes]]:
        """The float32 embeddings of a peer's (or a thread's) episodes, by the user text's marker."""
        out: dict[str, list[bytes]] = {}
        if self.backend == "sqlite":
            path = self.data / "episodic" / "episodes.db"
            if not path.exists():
                return out
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                rows = db.execute(
                    "SELECT user, embedding FROM episodes WHERE peer=? AND (? IS NULL OR thread=?)",
                    (peer, thread, thread),
                ).fetchall()
            finally:
                db.close()
        else:
            import numpy as np
            import psycopg

            with psycopg.connect(self.storage_url) as db:
                raw = db.execute(
                    "SELECT user_text, embedding::text FROM thoth_episodic.thoth_episodes "
                    "WHERE peer=%s AND (%s::text IS NULL OR thread=%s)",
                    (peer, thread, thread),
                ).fetchall()
            rows = [(u, np.array(json.loads(e), dtype=np.float32).tobytes() if e else None) for u, e in raw]
        for user, blob in rows:
            for marker in MARKER.findall(user or ""):
                if blob:
                    out.setdefault(marker, []).append(bytes(blob))
        return out

    def import_episodes(self, peer: str, count: int) -> tuple[list[Message], subprocess.CompletedProcess[str]]:
        """`thoth episodes import` of `count` episodes of a peer (past turns), each with its markers."""
        messages, lines = [], []
        for number in range(count):
            message = Message(self.ledger.fresh("zq"), peer, f"old{number % 4}", "default", self.ledger.fresh("ry"))
            message.layers, message.accepted, message.shown = ("episodic",), True, message.reply_marker
            self.ledger.messages[message.marker] = message
            messages.append(message)
            text = f"Back then I said {message.marker} about item {number}"
            lines.append(
                json.dumps(
                    {
                        "workspace": "default",
                        "peer": peer,
                        "thread": message.thread,
                        "user": text,
                        "assistant": f"{message.reply_marker} noted",
                        "occurred_at": time.time() - 86400,
                    }
                )
            )
        path = self.root / f"episodes-{self.ledger.counter}.jsonl"
        path.write_text("\n".join(lines) + "\n")
        return messages, self.thoth("episodes", "import", str(path), timeout=600)

    def reindex(self) -> None:
        """Build the ANN index again: SQLite's usearch files removed (the next recall rebuilds them), or REINDEX."""
        if self.backend == "sqlite":
            for path in (self.data / "episodic").glob("episodes.db.usearch*"):
                path.unlink()
            return
        import psycopg

        with psycopg.connect(self.storage_url, autocommit=True) as db:
            if db.execute("SELECT 1 FROM pg_namespace WHERE nspname='thoth_episodic'").fetchone():
                db.execute("REINDEX SCHEMA thoth_episodic")

    def postgres_text(self) -> str:
        """Every row of every table of the shared database, as text (PostgreSQL only)."""
        import psycopg

        parts: list[str] = []
        with psycopg.connect(self.storage_url, autocommit=True) as db:
            tables = db.execute(
                "SELECT table_schema, table_name FROM information_schema.tables "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') AND table_type='BASE TABLE'"
            ).fetchall()
            for schema, table in tables:
                rows = db.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()
                parts += [row[0] for row in rows]
        return "\n".join(parts)

    # --- faults -------------------------------------------------------------------------

    def fill_disk(self) -> str:
        """Make the data folder full: fill the tmpfs, or limit children's file size; returns the method."""
        if self.mounted and os.path.ismount(self.data):  # never fill a real disk
            fd = os.open(self.data / "filler", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                for size in (1 << 20, 4096, 1):  # unbuffered, down to the last byte
                    try:
                        while True:
                            os.write(fd, b"\0" * size)
                    except OSError:
                        pass
            finally:
                os.close(fd)
            return "tmpfs-full"
        self.fsize_limit = 0
        return "rlimit-fsize"

    def free_disk(self) -> None:
        """Undo `fill_disk`."""
        (self.data / "filler").unlink(missing_ok=True)
        self.fsize_limit = None

    def read_only(self, on: bool) -> bool:
        """Remount the data folder read-only (or back); False when it cannot be done here."""
        if not self.mounted:
            return False
        self.restart_driver()
        mode = "remount,ro" if on else "remount,rw"
        return subprocess.run(["mount", "-o", mode, str(self.data)], capture_output=True).returncode == 0

    def postgres(self, up: bool) -> None:
        """Stop or start the shared PostgreSQL with its own pg_ctl."""
        from pgserver._commands import pg_ctl  # the wheel's wrapper runs it as the server's system user

        if up:
            self.pg_server.ensure_postgres_running()
        else:
            pg_ctl(["-w", "stop", "-m", "fast"], pgdata=self.pg_server.pgdata, user=self.pg_server.system_user)
        self.restart_driver()

    def honcho_mode(self, mode: str) -> None:
        """ "ok", "hang" (never answers until released) or "down" (its port closed)."""
        if mode == "down":
            self.honcho.stop()
            return
        if self.honcho.server is None:
            self.honcho.start()
        if mode == "ok":
            self.honcho.mode = "ok"
            self.honcho.release.set()
            time.sleep(0.05)
            self.honcho.release.clear()
        else:
            self.honcho.mode = mode

    # --- tear-down ----------------------------------------------------------------------

    def close(self) -> None:
        """Stop the driver and the fakes, start PostgreSQL if a step left it stopped, unmount the data folder."""
        try:
            self.restart_driver()
            self.honcho_mode("ok")
            self.honcho.stop()
            self.anthropic.stop()
            if self.pg_server is not None and self.pg_server.get_pid() is None:
                self.pg_server.ensure_postgres_running()
        finally:
            if self.mounted:
                subprocess.run(["mount", "-o", "remount,rw", str(self.data)], capture_output=True)
                subprocess.run(["umount", "-l", str(self.data)], capture_output=True)
            shutil.rmtree(self.root, ignore_errors=True)


def remove_root(root: Path) -> None:
    """Remove a run's temp root, unmounting first any data folder a run left mounted under it."""
    for line in Path("/proc/mounts").read_text().splitlines() if Path("/proc/mounts").exists() else []:
        point = line.split()[1]
        if point.startswith(f"{root}/"):
            subprocess.run(["umount", "-l", point], capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


def mount_tmpfs(path: Path, size: str) -> bool:
    """Mount a small tmpfs on path (root and mount needed); False when that cannot be done here."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return done.returncode == 0


def bundle_text(path: Path) -> str:
    """Every member of a bundle, as one text."""
    parts = []
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            if handle is not None:
                parts.append(handle.read().decode(errors="replace"))
    return "\n".join(parts)


def float16_slices(blob: bytes) -> list[bytes]:
    """48-byte slices of a float32 vector and of its float16 form, to look for in raw files."""
    import numpy as np

    vector = np.frombuffer(blob, dtype=np.float32)
    half = vector.astype(np.float16).tobytes()
    return [blob[64:112], blob[400:448], half[32:80], half[200:248]]
