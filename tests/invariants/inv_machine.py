"""The model-based test: random sequences of turns, kills, forgets, bundles, approvals and faults on a real home.

Each rule is one step a person or the world takes; after each, `check` recovers the home (a
fresh runtime, as the next start) and checks the promises of docs/promises.md that are switched
on (`CHECKS`). Faults are rules too, each switched by `FAULTS`. Switches default to what holds
today; `THOTH_INVARIANTS_ALL=1` turns every one on (to see what is still broken).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import inv_checks as checks
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from inv_harness import ABORTS, MARKER, RUNS, THOTH, Message, Observation, Summary, World, bundle_text

PEERS = st.sampled_from(["alice", "bob", "carol"])
THREADS = st.sampled_from(["t1", "t2", "t3"])
AGENTS = st.sampled_from(["default", "default", "scout"])
KILL_POINTS = st.sampled_from(["start", "mid-stream", "last-word"])

# Each promise's check and each fault, on (True) or off; off are those still broken (issue 35, the report says).
CHECKS = {
    "kept": True,
    "erased": True,
    "erased_thread": True,
    "isolated": True,
    "approved": True,
    "no_abort": True,
    "integrity": True,
    "one_session": True,
    "answered": True,
}
# Under which fault `kept` is checked for the message it hit (a turn with no fault: always).
KEPT_UNDER = {
    "kill": True,
    "concurrent": True,
    "disk-full": True,
    "read-only": True,
    "postgres-down": True,
    "honcho-hang": True,
    "honcho-down": True,
}
# Under which fault `answered` is checked (the reply goes out though memory cannot be written).
ANSWERED_UNDER = {
    "disk-full": True,
    "read-only": True,
    "postgres-down": True,
    "honcho-hang": True,
    "honcho-down": True,
}
FAULTS = {  # and steps that still break a promise
    "bulk_import": True,
    "kill": True,
    "concurrent": True,
    "disk_full": True,
    "read_only": True,
    "postgres_down": True,
    "honcho_hang": True,
    "honcho_down": True,
}
if os.environ.get("THOTH_INVARIANTS_ALL") == "1":
    CHECKS = dict.fromkeys(CHECKS, True)
    KEPT_UNDER = dict.fromkeys(KEPT_UNDER, True)
    ANSWERED_UNDER = dict.fromkeys(ANSWERED_UNDER, True)
    FAULTS = dict.fromkeys(FAULTS, True)


class HomeMachine(RuleBasedStateMachine):
    """One agent home under random steps; `backend`, `pg_server`, `storage_url`, `root` are set per run."""

    backend = "sqlite"
    pg_server: Any = None
    new_storage_url: Any = None
    root: Path = Path("/tmp")
    runs = 0

    def __init__(self) -> None:
        super().__init__()
        HomeMachine.runs += 1
        url = self.new_storage_url() if self.backend == "postgres" else None
        self.world = World(
            self.root / f"run-{HomeMachine.runs}", backend=self.backend, pg_server=self.pg_server, storage_url=url
        )
        self.summary = RUNS.setdefault(self.backend, Summary())
        self.started = time.monotonic()
        self.before: Observation | None = None
        self.actor: str | None = None
        self.faulted = False
        self.log: list[str] = []  # the steps of this example, for a failure's message

    # --- bookkeeping --------------------------------------------------------------------

    def _step(self, name: str, actor: str | None = None, **args: Any) -> None:
        self.summary.steps[name] += 1
        self.world.ledger.step += 1
        self.actor = actor
        self.log.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in args.items())})")

    def _fault(self, name: str) -> None:
        self.summary.faults[name] += 1
        self.faulted = True

    def _code(self, what: str, code: int | None) -> None:
        """A process that aborted breaks `no_abort` (the test's own SIGKILL is -9, not an abort)."""
        self.summary.checks["no_abort"] += 1
        if code in ABORTS and CHECKS["no_abort"]:
            self._fail(f"no_abort: {what} ended with {code}")

    def _fail(self, line: str) -> None:
        self.summary.failures.append(f"{line} [after: {'; '.join(self.log)}]")
        raise AssertionError(f"{line}\nsteps: {'; '.join(self.log)}")

    def _message(self, peer: str, thread: str, agent: str, fault: str | None = None) -> Message:
        ledger = self.world.ledger
        message = Message(ledger.fresh("zq"), peer, thread, agent, ledger.fresh("ry"), fault=fault)
        ledger.messages[message.marker] = message
        return message

    def _asked(self, message: Message) -> bool:
        """Whether the model got this message (then the user's words were taken)."""
        return any(message.marker in str(r.body.get("messages")) for r in self.world.anthropic.messages_requests)

    def _driver_turn(self, message: Message, text: str | None = None) -> dict[str, Any]:
        answer = self.world.call(
            "turn",
            peer=message.peer,
            thread=message.thread,
            agent=message.agent,
            text=text or f"Please note {message.marker} for me",
        )
        if "died" in answer:
            self._code("driver (turn)", answer["died"])
        message.accepted = self._asked(message)
        if "reply" in answer:
            message.shown, message.complete = answer["reply"], True
        return answer

    def _answered(self, fault: str, what: str, answer: dict[str, Any]) -> None:
        """A turn under a fault still gets its reply (the memory waits; the user does not)."""
        if CHECKS["answered"] and checks.switched_on(ANSWERED_UNDER, fault, self.backend):
            self.summary.checks["answered"] += 1
            if "reply" not in answer:
                self._fail(f"answered: a turn {what} got no reply: {str(answer.get('error', answer))[:300]}")

    # --- rules: people ------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        self.summary.steps["home"] += 1

    @rule(peer=PEERS, thread=THREADS, agent=AGENTS)
    def turn(self, peer: str, thread: str, agent: str) -> None:
        """A streamed turn that runs to its end."""
        self._step("turn", peer, peer=peer, thread=thread, agent=agent)
        self._driver_turn(self._message(peer, thread, agent))

    @precondition(lambda self: FAULTS["kill"])
    @rule(peer=PEERS, thread=THREADS, agent=AGENTS, point=KILL_POINTS)
    def killed_turn(self, peer: str, thread: str, agent: str, point: str) -> None:
        """`thoth ask` SIGKILLed before the model answers, mid-stream, or after the last word."""
        self._step(f"kill:{point}", peer, peer=peer, thread=thread, agent=agent)
        self._fault("kill")
        message = self._message(peer, thread, agent, "kill")
        shown, code = self.world.ask_killed(f"Please note {message.marker} for me", peer, thread, agent, point)
        self._code("thoth ask", code)
        message.accepted, message.shown = self._asked(message), shown

    @precondition(lambda self: FAULTS["concurrent"])
    @rule(peer=PEERS, count=st.integers(2, 3))
    def concurrent_first_turns(self, peer: str, count: int) -> None:
        """Several `thoth ask` on one new thread at once."""
        self._step("concurrent", peer, peer=peer, count=count)
        self._fault("concurrent")
        thread = f"c{self.world.ledger.counter}"
        messages = [self._message(peer, thread, "default", "concurrent") for _ in range(count)]
        children = [
            subprocess.Popen(
                [THOTH, "ask", f"Please note {m.marker} for me", "--peer", peer, "--thread", thread],
                cwd=self.world.home,
                env=self.world.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            for m in messages
        ]
        for message, child in zip(messages, children, strict=True):
            out, _ = child.communicate(timeout=180)
            self._code("thoth ask (concurrent)", child.returncode)
            message.accepted, message.shown = self._asked(message), out

    @rule(peer=PEERS)
    def remember(self, peer: str) -> None:
        """`/remember` a fact."""
        self._step("remember", peer, peer=peer)
        marker = self.world.ledger.fresh("zq")
        answer = self.world.call("turn", peer=peer, thread="t1", agent="default", text=f"/remember my code is {marker}")
        if "died" in answer:
            self._code("driver (/remember)", answer["died"])
        if "reply" in answer and "error" not in answer["reply"].lower():
            self.world.ledger.remembered[marker] = (peer, False)

    @rule(peer=PEERS, thread=st.one_of(st.none(), THREADS))
    def forget(self, peer: str, thread: str | None) -> None:
        """`thoth forget --peer P [--thread T]`."""
        self._step("forget-thread" if thread else "forget-peer", peer, peer=peer, thread=thread)
        for marker, blobs in self.world.episode_vectors(peer, thread).items():
            if marker in self.world.ledger.messages:
                self.world.ledger.messages[marker].vectors = blobs
        done = self.world.thoth("forget", "--peer", peer, *(["--thread", thread] if thread else []), "--json")
        self._code("thoth forget", done.returncode)
        if done.returncode == 0:
            self.world.ledger.forget(peer, thread)
        else:
            self._fail(f"forget: thoth forget exited {done.returncode}: {done.stderr.strip()[-300:]}")

    @rule()
    def roundtrip_bundle(self) -> None:
        """`thoth bundle export`, then `import --merge` into the same home (adds nothing, brings nothing back)."""
        self._step("bundle")
        path = self.world.root / f"bundle-{self.world.ledger.counter}.tar.gz"
        done = self.world.thoth("bundle", "export", str(path))
        self._code("thoth bundle export", done.returncode)
        if done.returncode != 0:
            self._fail(f"bundle: export exited {done.returncode}: {done.stderr.strip()[-300:]}")
        text = bundle_text(path)
        stale = sorted(m for m in self.world.ledger.forgotten_markers(threads=CHECKS["erased_thread"]) if m in text)
        if stale:
            self._fail(f"erased: the bundle made after forget holds {stale[:3]}")
        done = self.world.thoth("bundle", "import", str(path), "--merge")
        self._code("thoth bundle import", done.returncode)
        if done.returncode != 0:
            self._fail(f"bundle: import --merge exited {done.returncode}: {done.stderr.strip()[-300:]}")
        after = self.world.observe()
        if self.before is not None and isinstance(after, Observation):
            counts = [{name: len(records) for name, records in seen.sections.items()} for seen in (self.before, after)]
            if counts[0] != counts[1]:
                self._fail(f"bundle: import --merge into the same home changed its records: {counts[0]} -> {counts[1]}")

    @rule(agent=AGENTS)
    def nightly(self, agent: str) -> None:
        """`thoth reflect nightly` (run by one of the agents)."""
        self._step("nightly", agent=agent)
        done = self.world.thoth("reflect", "nightly", env={"THOTH_AGENT": agent})
        self._code("thoth reflect nightly", done.returncode)

    @rule(agent=AGENTS)
    def reap(self, agent: str) -> None:
        """Idle sessions end (as a long-running frontend's reaper ends them); reflection runs on each."""
        self._step("reap", agent=agent)
        answer = self.world.call("reap", agent=agent, ahead=3600.0)
        if "died" in answer:
            self._code("driver (reap)", answer["died"])

    @rule(pick=st.integers(0, 5), approve=st.booleans())
    def decide(self, pick: int, approve: bool) -> None:
        """A founder approves or rejects a waiting item: `thoth review approve|reject ID --actor founder`."""
        seen = self.before
        if seen is None or not seen.approvals:
            return
        item = seen.approvals[pick % len(seen.approvals)]
        decision = "approve" if approve else "reject"
        self._step(decision, item=item["id"])
        done = self.world.thoth("review", decision, item["id"], "--actor", "founder")
        self._code(f"thoth review {decision}", done.returncode)
        if done.returncode != 0:
            self._fail(f"approved: thoth review {decision} exited {done.returncode}: {done.stderr.strip()[-300:]}")
        for marker in MARKER.findall(f"{item.get('title', '')} {item.get('body', '')}"):
            if marker in self.world.ledger.items:
                self.world.ledger.items[marker].decided = True
                self.world.ledger.items[marker].approved = approve

    @rule(pick=st.integers(0, 5), actor=PEERS, approve=st.booleans())
    def stranger_decides(self, pick: int, actor: str, approve: bool) -> None:
        """A peer tries to approve or reject another peer's waiting item: refused, and `isolated` sees it stay."""
        seen = self.before
        theirs = [item for item in seen.approvals if item.get("peer") not in (None, actor)] if seen else []
        if not theirs:
            return
        item = theirs[pick % len(theirs)]
        decision = "approve" if approve else "reject"
        self._step(f"stranger-{decision}", actor, item=item["id"], about=item["peer"])
        done = self.world.thoth("review", decision, item["id"], "--actor", actor)
        self._code(f"thoth review {decision} (stranger)", done.returncode)
        if done.returncode == 0:
            self._fail(f"isolated: {actor} could {decision} {item['id']}, an item about {item['peer']}")

    @rule()
    def rebuild_index(self) -> None:
        """The ANN index is built again (SQLite: its files removed, rebuilt at the next recall; PostgreSQL: REINDEX)."""
        self._step("index-rebuild")
        self.world.reindex()

    @precondition(lambda self: FAULTS["bulk_import"])
    @rule(peer=PEERS, count=st.sampled_from([30, 400]))
    def import_episodes(self, peer: str, count: int) -> None:
        """`thoth episodes import` of a peer's past episodes (the ANN index then holds many rows to remove)."""
        self._step("import-episodes", peer, peer=peer, count=count)
        _, done = self.world.import_episodes(peer, count)
        self._code("thoth episodes import", done.returncode)
        if done.returncode != 0:
            self._fail(f"import: thoth episodes import exited {done.returncode}: {done.stderr.strip()[-300:]}")

    # --- rules: faults ------------------------------------------------------------------

    @precondition(lambda self: FAULTS["disk_full"])
    @rule(peer=PEERS, thread=THREADS)
    def disk_full_turn(self, peer: str, thread: str) -> None:
        """A turn on a full disk; the disk is freed after it."""
        self._step("disk-full-turn", peer, peer=peer, thread=thread)
        self._fault(self.world.fill_disk())
        try:
            self.world.restart_driver()
            answer = self._driver_turn(self._message(peer, thread, "default", "disk-full"))
        finally:
            self.world.free_disk()
            self.world.restart_driver()
        self._answered("disk-full", "on a full disk", answer)

    @precondition(lambda self: FAULTS["read_only"])
    @rule(peer=PEERS, thread=THREADS)
    def read_only_turn(self, peer: str, thread: str) -> None:
        """A turn with the data folder read-only; writable again after it."""
        if not self.world.read_only(True):
            self.summary.skipped["read-only (no remount here)"] += 1
            return
        self._step("read-only-turn", peer, peer=peer, thread=thread)
        self._fault("read-only")
        try:
            answer = self._driver_turn(self._message(peer, thread, "default", "read-only"))
        finally:
            self.world.read_only(False)
        self._answered("read-only", "on a read-only data folder", answer)

    @precondition(lambda self: FAULTS["postgres_down"] and self.backend == "postgres")
    @rule(peer=PEERS, thread=THREADS)
    def postgres_outage_turn(self, peer: str, thread: str) -> None:
        """A turn while PostgreSQL is stopped; it is started again after."""
        self._step("postgres-down-turn", peer, peer=peer, thread=thread)
        self._fault("postgres-down")
        self.world.postgres(False)
        try:
            answer = self._driver_turn(self._message(peer, thread, "default", "postgres-down"))
        finally:
            self.world.postgres(True)
        self._answered("postgres-down", "while PostgreSQL is down", answer)

    @precondition(lambda self: FAULTS["honcho_hang"] or FAULTS["honcho_down"])
    @rule(peer=PEERS, thread=THREADS, mode=st.sampled_from(["hang", "down"]))
    def honcho_fault_turn(self, peer: str, thread: str, mode: str) -> None:
        """A turn while Honcho hangs or is down; it answers again after."""
        if not FAULTS[f"honcho_{mode}"]:
            return
        self._step(f"honcho-{mode}-turn", peer, peer=peer, thread=thread)
        self._fault(f"honcho-{mode}")
        self.world.honcho_mode(mode)
        try:
            answer = self._driver_turn(self._message(peer, thread, "default", f"honcho-{mode}"))
        finally:
            self.world.honcho_mode("ok")
        self._answered(f"honcho-{mode}", f"while Honcho is {'hanging' if mode == 'hang' else 'down'}", answer)

    # --- the promises -------------------------------------------------------------------

    @invariant()
    def promises(self) -> None:
        """Recover (a fresh runtime) and check every promise switched on."""
        if not self.summary.steps:
            return
        seen = self.world.observe()
        if not isinstance(seen, Observation):
            self._code("driver (observe)", seen.get("died"))
            self._fail(f"recovery: a new runtime could not read the home: {str(seen)[:400]}")
        broken: list[str] = []
        for name, found in (
            ("kept", lambda: checks.kept(self.world.ledger, seen, KEPT_UNDER, self.backend)),
            ("erased", lambda: checks.erased(self.world, self.world.ledger, threads=CHECKS["erased_thread"])),
            (
                "isolated",
                lambda: checks.isolated(self.world.ledger, seen, None if self.faulted else self.before, self.actor),
            ),
            ("approved", lambda: checks.approved_stay(self.world, self.world.ledger)),
            ("integrity", lambda: checks.sound(self.world)),
            ("one_session", lambda: checks.one_session(seen)),
        ):
            if CHECKS[name]:
                self.summary.checks[name] += 1
                broken += found()
        self.before, self.faulted, self.actor = seen, False, None
        if broken:
            self.summary.failures += [f"{line} [after: {'; '.join(self.log)}]" for line in broken]
            raise AssertionError("\n".join(broken) + f"\nsteps: {'; '.join(self.log)}")

    def teardown(self) -> None:
        self.summary.seconds += time.monotonic() - self.started
        self.world.close()
