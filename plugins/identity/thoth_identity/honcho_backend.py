"""The Honcho backend: ingest through a persistent outbox, the dialectic under a hard deadline.

Two SDK clients per Honcho workspace, made when the backend starts (in a worker thread): a fast
one for the pre-spawn dialectic (`max_retries=0`, timeout `dialectic_timeout`, inside one outer
deadline set by the layer), and a patient one for background writes. When the dialectic is
slow, down, rate-limited or refused, the block falls back to the last good answer or the peer's
cached representation (refreshed after each ingest), marked as stale, and the log says why.

The dialectic runs on the event loop through the SDK's async view, so the deadline cancels it:
no call is left behind in a thread. (An abandoned call in a daemon thread aborted the process,
exit 134, when Honcho's late answer woke it while the interpreter finalized: Python 3.11 ends
such a thread with `pthread_exit`, whose unwinding cannot pass the Rust frame of the SDK's
`validate_call` wrapper.)

Reads never create anything: before the dialectic, a peer this process has not written is
looked up (`peers/list`, filtered by id); an unknown one has nothing to tell, so Honcho's chat
(which creates unknown peers and starts LLM work) is not called. Writes go through the outbox
(`outbox.py`): durable first, then sent in order by one writer thread, so messages sent while
Honcho is down survive the process. A 401 or 403 is named as such and stops the sending until
the key changes (a restart); retrying cannot help.

What Honcho says is the server's word: its dialectic answer and the cached representation show
only the sentences the write policy shows (`policy.screen_answer`), and a message that asks to
set rules or instructions aside is sent with Honcho's reasoning off, so no conclusion is drawn
from it (`policy.derives_from`).

Mapping: Thoth workspace W -> Honcho workspace `workspace` (or `workspace-W` when W is not
`default`); peer -> Honcho peer; (peer, thread) -> Honcho session `peer-thread-HASH` (the hash
of both names keeps the sessions of different pairs apart); the agent is the peer `agent_peer`.
Ids are reduced to Honcho's `[A-Za-z0-9_-]` (with a hash when changed).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import UTC, datetime
from typing import Any

import httpx
from honcho import Honcho, Peer
from honcho import Session as HonchoSession

from thoth_core import ContextBlock, Reply, Session, Turn

from .backend import IdentityBackend, fallback_block, last_model
from .graph import block_facts
from .honcho_data import export_honcho, forget_honcho, import_honcho, wait_forgotten
from .honcho_errors import RETRYABLE, describe, error_kind, retryable
from .honcho_ids import NO_DERIVING, honcho_id, session_id
from .outbox import Outbox
from .policy import derives_from, screen_answer, visible
from .render import user_model_block

logger = logging.getLogger(__name__)

SEND_GRACE = 2.0  # seconds ingest waits for Honcho before leaving the messages to the writer thread
CLOSE_GRACE = 2.0  # seconds the writer's call under way may take (from its start) once the backend closes
FALLBACK_TIME = 0.1  # seconds the backend keeps for its own fallback before `until`


class SerialWorker:
    """One daemon thread running submitted calls in order; a call stuck on a hung server never blocks exit."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[tuple[Any, tuple[Any, ...], Future[Any]]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.running_since: float | None = None  # monotonic start of the call under way, None when idle

    def submit(self, function: Any, *args: Any) -> Future[Any]:
        """Queue a call; its future resolves when it has run."""
        future: Future[Any] = Future()
        self._jobs.put((function, args, future))
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
                self._thread.start()
        return future

    def _run(self) -> None:
        while True:
            function, args, future = self._jobs.get()
            if future.set_running_or_notify_cancel():
                self.running_since = time.monotonic()
                try:
                    future.set_result(function(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                    future.set_exception(exc)
                finally:
                    self.running_since = None

    def wait(self, timeout: float | None) -> bool:
        """Wait until everything queued so far has run; False when that took longer than timeout."""
        try:
            self.submit(lambda: None).result(timeout=timeout)
        except FutureTimeout:
            return False
        return True


class HonchoBackend(IdentityBackend):
    """Identity memory in a Honcho server, through the `honcho-ai` SDK."""

    name = "honcho"
    keeps_unsent_as_messages = False  # they go into the outbox, then to Honcho

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[tuple[str, bool], Honcho] = {}
        self._http: list[httpx.Client] = []  # the sync clients' connections, closed by `close`
        self._known: set[tuple[str, str, str]] = set()  # (honcho workspace, kind, id) known to exist on the server
        self._lock = threading.Lock()
        self.writer = SerialWorker("thoth-identity-writes")  # in order
        self.outbox = Outbox(self.store) if self.store is not None else None
        self.refused: str | None = None  # why Honcho refused the key (401/403): nothing is sent until a restart

    def start(self) -> None:
        """Make the default workspace's clients and send what earlier processes left in the outbox."""
        workspace = str(self.runtime.config.get("thoth.workspace") or "default")
        self.client(workspace, fast=True)
        self.client(workspace, fast=False)
        if self.outbox is not None and self.outbox.waiting():
            logger.info("identity: %d message(s) wait in the Honcho outbox; sending them", self.outbox.waiting())
            self.writer.submit(self._send_waiting)

    # --- clients ------------------------------------------------------------------------

    def workspace_id(self, workspace: str) -> str:
        """The Honcho workspace of a Thoth workspace."""
        base = self.settings.workspace
        return honcho_id(base if workspace == "default" else f"{base}-{workspace}")

    def client(self, workspace: str, *, fast: bool) -> Honcho:
        """The fast (pre-spawn) or patient (writes) SDK client of a Thoth workspace."""
        key = (workspace, fast)
        with self._lock:
            if key not in self._clients:
                timeout = self.settings.dialectic_timeout if fast else self.settings.write_timeout
                http = httpx.Client(timeout=httpx.Timeout(timeout))  # ours, so `close` can close it
                self._http.append(http)
                self._clients[key] = Honcho(
                    base_url=self.settings.base_url,
                    api_key=self.settings.api_key,
                    workspace_id=self.workspace_id(workspace),
                    timeout=timeout,
                    max_retries=0 if fast else self.settings.write_retries,
                    http_client=http,
                )
            return self._clients[key]

    def honcho_peer(self, honcho: Honcho, name: str, *, create: bool) -> Peer:
        """The Honcho peer of a Thoth name; `create`: made on the server first, unless this process knows it exists."""
        pid = honcho_id(name)
        if create and (honcho.workspace_id, "peer", pid) not in self._known:
            honcho.peer(pid)  # get-or-create on the server
            self._known.add((honcho.workspace_id, "peer", pid))
        return Peer(pid, honcho)

    def peer_exists(self, honcho: Honcho, name: str) -> bool:
        """Whether Honcho has this peer, asked without creating it (or the workspace's peers)."""
        pid = honcho_id(name)
        if (honcho.workspace_id, "peer", pid) in self._known:
            return True
        found = any(peer.id == pid for peer in honcho.peers(filters={"id": pid}, size=1).items)
        if found:
            self._known.add((honcho.workspace_id, "peer", pid))
        return found

    async def peer_exists_async(self, honcho: Honcho, name: str) -> bool:
        """`peer_exists` on the event loop (the SDK's async view), so a deadline can cancel it."""
        pid = honcho_id(name)
        if (honcho.workspace_id, "peer", pid) in self._known:
            return True
        page = await honcho.aio.peers(filters={"id": pid}, size=1)
        found = any(peer.id == pid for peer in page.items)
        if found:
            self._known.add((honcho.workspace_id, "peer", pid))
        return found

    def session_deleted(self, honcho: Honcho, sid: str) -> None:
        """Forget that a session exists (it was deleted): the next write about its thread makes it again."""
        self._known.discard((honcho.workspace_id, "session", sid))

    def _session(self, honcho: Honcho, peer: str, thread: str) -> HonchoSession:
        sid = session_id(peer, thread)
        if (honcho.workspace_id, "session", sid) not in self._known:
            honcho.session(sid, peers=[honcho_id(peer), honcho_id(self.settings.agent_peer)])
            self._known.add((honcho.workspace_id, "session", sid))
        return HonchoSession(sid, honcho)

    def _refuse(self, exc: BaseException) -> None:
        """Honcho refused the key: say so once, and stop sending until the key changes (a restart)."""
        if self.refused is None:
            self.refused = describe(exc, self.settings.base_url)
            logger.error("identity: %s; not retried: nothing goes to Honcho until the key is fixed", self.refused)

    # --- pre-spawn ----------------------------------------------------------------------

    async def context(self, turn: Turn, session: Session, *, until: float | None = None) -> ContextBlock | None:
        """Hard facts plus Honcho's dialectic answer, or the fallback when Honcho does not answer in time."""
        until = until if until is not None else time.monotonic() + self.settings.dialectic_timeout + FALLBACK_TIME
        held = await asyncio.to_thread(self._shown_facts, turn.workspace, turn.peer)
        facts = block_facts(held, turn.peer, turn.text)
        timeout = min(self.settings.dialectic_timeout, until - time.monotonic() - FALLBACK_TIME)
        try:
            if self.refused is not None:
                raise PermissionError(self.refused)
            if timeout <= 0:
                raise TimeoutError
            answer = await asyncio.wait_for(self._ask(turn.workspace, turn.peer, turn.text), timeout)
        except Exception as exc:  # noqa: BLE001 - slow, down, refused or rate-limited: the turn goes on
            self.last_kind = "fallback"
            return await asyncio.to_thread(self._fallback, turn, facts, exc)
        self.last_kind = "live"
        if answer:
            await asyncio.to_thread(self.store.cache_put, turn.workspace, turn.peer, "dialectic", answer)
            screened, _ = await asyncio.to_thread(screen_answer, answer, turn.peer)  # the server's word, judged
            return user_model_block(turn.peer, facts=facts, answer=screened or None, budget=self.budget)
        return user_model_block(turn.peer, facts=facts, answer=None, budget=self.budget)

    def _shown_facts(self, workspace: str, peer: str) -> list[dict[str, Any]]:
        """The peer's current facts the write policy shows (derived ones judged; blocking)."""
        return visible(self.store, workspace, peer, facts=self.store.current_facts(workspace, peer))[0]

    async def _ask(self, workspace: str, peer: str, text: str) -> str:
        honcho = self.client(workspace, fast=True)
        if not await self.peer_exists_async(honcho, peer):  # nothing to know; chat would create the peer
            return ""
        kwargs: dict[str, Any] = {"timeout": self.settings.dialectic_timeout}
        if self.settings.reasoning_level:
            kwargs["reasoning_level"] = self.settings.reasoning_level
        try:
            answer = await Peer(honcho_id(peer), honcho).aio.chat(text, **kwargs)
        except Exception as exc:
            if error_kind(exc) in ("unauthorized", "forbidden"):
                self._refuse(exc)
            raise
        return str(answer or "").strip()

    def _fallback(self, turn: Turn, facts: list[dict[str, Any]], exc: BaseException) -> ContextBlock:
        answer = self.store.cache_get(turn.workspace, turn.peer, "dialectic")
        cached = answer or last_model(self.store, turn.workspace, turn.peer)
        what = "the last good answer" if answer else "the cached representation" if cached else "hard facts only"
        reason = "no answer in time" if isinstance(exc, TimeoutError) else describe(exc, self.settings.base_url)
        if isinstance(exc, PermissionError):
            reason = str(exc)
        logger.warning("identity: Honcho dialectic for peer %s failed (%s); using %s", turn.peer, reason, what)
        return fallback_block(turn.peer, facts=facts, cached=cached, budget=self.budget, text=turn.text)

    # --- background writes --------------------------------------------------------------

    async def ingest(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Put both messages in the outbox (durable; raises if that fails), then send what waits, in order.

        Idempotent by turn id: a turn Honcho accepted, or one already waiting, is not queued
        again, so a write replayed from the core's journal adds nothing twice. Waits at most
        `SEND_GRACE` for Honcho: a hung server never holds up the turn's write.
        """
        messages = [
            (turn.id, "user", turn.text, turn.created_at),
            (turn.id, "assistant", reply.text, reply.finished_at),
        ]
        assert self.outbox is not None
        await asyncio.to_thread(self.outbox.put, turn.workspace, turn.peer, turn.thread, messages)
        future = self.writer.submit(self._send_waiting)
        try:
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), SEND_GRACE)
        except TimeoutError:
            logger.info("identity: Honcho is slow; turn %s's messages go out from the outbox later", turn.id)

    def _send_waiting(self) -> int:
        """Send the outbox oldest first, session by session; stop at the first failure (order is kept)."""
        assert self.outbox is not None
        sent, refreshed = 0, set()
        while self.refused is None:
            rows = self.outbox.claim()
            if not rows:
                break
            workspace, peer, thread = rows[0]["workspace"], rows[0]["peer"], rows[0]["thread"]
            try:
                honcho = self.client(workspace, fast=False)
                user = self.honcho_peer(honcho, peer, create=True)
                agent = self.honcho_peer(honcho, self.settings.agent_peer, create=True)
                self._session(honcho, peer, thread).add_messages(
                    [
                        (user if row["role"] == "user" else agent).message(
                            row["content"],
                            created_at=datetime.fromtimestamp(row["at"], UTC),
                            configuration=None if derives_from(row["content"]) else NO_DERIVING,
                        )
                        for row in rows
                    ]
                )
            except Exception as exc:  # noqa: BLE001 - the rows stay in the outbox; the log says why
                self._unsent(rows, exc)
                break
            self.outbox.sent(rows)
            sent += len(rows)
            refreshed.add((workspace, peer))
        for workspace, peer in refreshed:
            self._refresh_representation(workspace, peer)
        return sent

    def _unsent(self, rows: list[dict[str, Any]], exc: BaseException) -> None:
        assert self.outbox is not None
        reason = describe(exc, self.settings.base_url)
        peer = rows[0]["peer"]
        if error_kind(exc) in ("unauthorized", "forbidden"):
            self.outbox.release(rows, reason)
            self._refuse(exc)
        elif not retryable(exc):
            self.outbox.park(rows, reason)
            logger.error(
                "identity: Honcho rejected %d message(s) of peer %s (%s); kept in the outbox, not retried",
                len(rows),
                peer,
                reason,
            )
        else:
            self.outbox.release(rows, reason)
        logger.warning(
            "identity: Honcho ingest for peer %s failed (%s); %d message(s) wait in the outbox (%s) and go out, "
            "in order, when Honcho is back",
            peer,
            reason,
            self.outbox.waiting(rows[0]["workspace"], peer),
            self.store.where,
        )

    def _refresh_representation(self, workspace: str, peer: str) -> None:
        try:
            representation = Peer(honcho_id(peer), self.client(workspace, fast=False)).representation()
        except Exception as exc:  # noqa: BLE001 - only the fallback's freshness is at stake
            logger.info("identity: refreshing %s's representation failed: %s", peer, describe(exc))
            return
        if representation:
            self.store.cache_put(workspace, peer, "representation", representation)

    def copy_notes(self, workspace: str, peer: str, texts: list[str], *, author: str) -> None:
        """Write notes as Honcho conclusions about the peer, in the background (agent-authored when not the user's)."""
        if texts:
            self.writer.submit(self._conclude, workspace, peer, list(texts), author)

    def _conclude(self, workspace: str, peer: str, texts: list[str], author: str) -> None:
        if self.refused is not None:
            logger.warning("identity: %d note(s) about %s stay local: %s", len(texts), peer, self.refused)
            return
        honcho = self.client(workspace, fast=False)
        try:
            user = self.honcho_peer(honcho, peer, create=True)
            if author == "user":
                view = user.conclusions
            else:
                view = self.honcho_peer(honcho, self.settings.agent_peer, create=True).conclusions_of(user.id)
            for start in range(0, len(texts), 100):
                view.create([{"content": text} for text in texts[start : start + 100]])
        except Exception as exc:  # noqa: BLE001
            if error_kind(exc) in ("unauthorized", "forbidden"):
                self._refuse(exc)
            logger.warning(
                "identity: writing %d conclusion(s) about %s to Honcho failed (%s); they stay in the local store",
                len(texts),
                peer,
                describe(exc, self.settings.base_url),
            )

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for the background writes queued so far (tests, forget and shutdown)."""
        self.writer.wait(timeout)

    # --- export, import, forget, status -------------------------------------------------

    def export(self, workspace: str, peer: str, *, local_only: bool = False) -> dict[str, Any]:
        """Local rows, waiting messages and Honcho's sessions, conclusions and card; raises if unreadable."""
        assert self.outbox is not None
        document = super().export(workspace, peer) | {"outbox": self.outbox.rows(workspace, peer)}
        if not local_only:
            document["honcho"] = export_honcho(self, workspace, peer)
        return document

    def import_document(self, document: dict[str, Any], *, workspace: str, peer: str) -> dict[str, int]:
        """Local rows, Honcho's sessions and conclusions, then the waiting messages (sent after them), each once."""
        assert self.outbox is not None
        added = super().import_document(document, workspace=workspace, peer=peer)
        self.flush()
        if document.get("honcho"):
            added.update(import_honcho(self, document["honcho"], workspace=workspace, peer=peer))
        threads: dict[str, list[tuple[str, str, str, float]]] = {}
        for m in document.get("outbox", []):
            threads.setdefault(m["thread"], []).append((m["turn_id"], m["role"], m["content"], m["at"]))
        added["queued_messages"] = sum(self.outbox.put(workspace, peer, t, rows) for t, rows in threads.items())
        self.writer.submit(self._send_waiting)
        self.flush()
        return added

    def forget(self, workspace: str, peer: str, thread: str | None, *, wait: float = 0.0) -> dict[str, int]:
        """Erase waiting messages, ask Honcho to delete the peer's data (polling up to `wait` s), delete local rows."""
        assert self.outbox is not None
        dropped = self.outbox.drop(workspace, peer, thread)
        self.flush()  # a send already under way finishes before its session is deleted
        receipt = forget_honcho(self, workspace, peer, thread)
        if dropped:
            receipt["unsent_messages"] = dropped
        if wait > 0 and not any(f"honcho_{kind}" in receipt for kind in RETRYABLE):  # Honcho took the deletes
            receipt.update(wait_forgotten(self, workspace, peer, thread, timeout=wait))
        return {**receipt, **self.store.delete(workspace, peer, thread)}

    def status(self, workspace: str, peer: str) -> dict[str, Any]:
        """Local counts plus messages waiting in the outbox (and why, when Honcho refused them)."""
        assert self.outbox is not None
        status = {**super().status(workspace, peer), "pending_ingest": self.outbox.waiting(workspace, peer)}
        error = self.refused or self.outbox.last_error(workspace, peer)
        if error:
            status["honcho_error"] = error
        return status

    def close(self) -> None:
        """Give the writer's call under way up to CLOSE_GRACE from its start (the rest waits in the outbox), close."""
        since = self.writer.running_since
        grace = CLOSE_GRACE if since is None else max(0.0, CLOSE_GRACE - (time.monotonic() - since))
        if not self.writer.wait(grace):  # a call stuck on a hung Honcho since the turn does not hold up the exit
            logger.info("identity: Honcho writes still running at exit; what was not sent waits in the outbox")
        for http in self._http:
            http.close()
        if self.outbox is not None:
            self.outbox.close()  # rows still claimed (Honcho hung) go out from the next process at once
        super().close()
