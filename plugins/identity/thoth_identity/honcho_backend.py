"""The Honcho backend: ingest into the peer's Honcho session, the dialectic under a hard deadline.

Two SDK clients per Honcho workspace: a fast one for the pre-spawn dialectic (`max_retries=0`,
timeout `dialectic_timeout`, wrapped in one outer `asyncio.wait_for` of the same length, well
inside the layer's 1.5 s deadline), and a patient one for background writes. When the
dialectic is slow, down or rate-limited, the block falls back to the last good answer or the
peer's cached representation (refreshed after each ingest), and the log says so.

Mapping: Thoth workspace W -> Honcho workspace `workspace` (or `workspace-W` when W is not
`default`); peer -> Honcho peer; (peer, thread) -> Honcho session `peer-thread-HASH` (the hash
of both names keeps the sessions of different pairs apart); the agent is the peer `agent_peer`.
Ids are reduced to Honcho's `[A-Za-z0-9_-]` (with a hash when changed).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from honcho import Honcho, Peer
from honcho import Session as HonchoSession
from honcho.http.exceptions import NotFoundError
from honcho.http.exceptions import TimeoutError as HonchoTimeout

from thoth_core import ContextBlock, Reply, Session, Turn

from .backend import IdentityBackend
from .render import relevant_facts, user_model_block

logger = logging.getLogger(__name__)

MAX_PENDING = 200  # messages kept for retry while Honcho is unreachable


def honcho_id(name: str) -> str:
    """A Honcho resource id for a Thoth name (peer, thread, workspace)."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", name)[:200] or "_"
    return cleaned if cleaned == name else f"{cleaned}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def session_id(peer: str, thread: str) -> str:
    """The Honcho session of a peer's thread: readable, and distinct for every (peer, thread) pair."""
    digest = hashlib.sha1(f"{peer}\x00{thread}".encode()).hexdigest()[:12]
    return f"{honcho_id(f'{peer}-{thread}')[:80]}-{digest}"  # well inside Honcho's id length


def _describe(exc: BaseException) -> str:
    return "no answer in time" if isinstance(exc, TimeoutError | HonchoTimeout) else f"{type(exc).__name__}: {exc}"


class HonchoBackend(IdentityBackend):
    """Identity memory in a Honcho server, through the `honcho-ai` SDK."""

    name = "honcho"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[tuple[str, bool], Honcho] = {}
        self._known: set[tuple[str, str, str]] = set()  # (honcho workspace, kind, id) created on the server
        self._pending: dict[tuple[str, str, str], list[tuple[str, str, str]]] = {}  # (turn id, role, text)
        self._lock = threading.Lock()
        # Pre-spawn calls get their own threads, so slow background writes never delay a turn.
        self._dialectic_executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="thoth-identity-dialectic")
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thoth-identity-writes")  # in order
        self._futures: set[Future[Any]] = set()

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
                self._clients[key] = Honcho(
                    base_url=self.settings.base_url,
                    api_key=self.settings.api_key,
                    workspace_id=self.workspace_id(workspace),
                    timeout=self.settings.dialectic_timeout if fast else self.settings.write_timeout,
                    max_retries=0 if fast else self.settings.write_retries,
                )
            return self._clients[key]

    def _peer(self, honcho: Honcho, name: str, *, create: bool) -> Peer:
        pid = honcho_id(name)
        if create and (honcho.workspace_id, "peer", pid) not in self._known:
            honcho.peer(pid)  # get-or-create on the server
            self._known.add((honcho.workspace_id, "peer", pid))
        return Peer(pid, honcho)

    def _session(self, honcho: Honcho, peer: str, thread: str) -> HonchoSession:
        sid = session_id(peer, thread)
        if (honcho.workspace_id, "session", sid) not in self._known:
            honcho.session(sid, peers=[honcho_id(peer), honcho_id(self.settings.agent_peer)])
            self._known.add((honcho.workspace_id, "session", sid))
        return HonchoSession(sid, honcho)

    # --- pre-spawn ----------------------------------------------------------------------

    async def context(self, turn: Turn, session: Session) -> ContextBlock | None:
        """Hard facts plus Honcho's dialectic answer, or the fallback when Honcho does not answer in time."""
        facts = relevant_facts(await asyncio.to_thread(self.store.current_facts, turn.workspace, turn.peer), turn.text)
        timeout = self.settings.dialectic_timeout
        loop = asyncio.get_running_loop()
        try:
            answer = await asyncio.wait_for(
                loop.run_in_executor(self._dialectic_executor, self._dialectic, turn.workspace, turn.peer, turn.text),
                timeout,
            )
        except Exception as exc:  # noqa: BLE001 - slow, down or rate-limited: the turn goes on
            return await asyncio.to_thread(self._fallback, turn, facts, exc)
        if answer:
            await asyncio.to_thread(self.store.cache_put, turn.workspace, turn.peer, "dialectic", answer)
        return user_model_block(turn.peer, facts=facts, answer=answer or None, budget=self.budget)

    def _dialectic(self, workspace: str, peer: str, text: str) -> str:
        honcho = self.client(workspace, fast=True)
        kwargs: dict[str, Any] = {"timeout": self.settings.dialectic_timeout}
        if self.settings.reasoning_level:
            kwargs["reasoning_level"] = self.settings.reasoning_level
        try:
            answer = self._peer(honcho, peer, create=False).chat(text, **kwargs)
        except NotFoundError:  # a peer Honcho has not seen yet: nothing to know, nothing wrong
            return ""
        return str(answer or "").strip()

    def _fallback(self, turn: Turn, facts: list[dict[str, Any]], exc: BaseException) -> ContextBlock | None:
        answer = self.store.cache_get(turn.workspace, turn.peer, "dialectic")
        cached = answer or self.store.cache_get(turn.workspace, turn.peer, "representation")
        what = "the last good answer" if answer else "the cached representation" if cached else "hard facts only"
        logger.warning("identity: Honcho dialectic for peer %s failed (%s); using %s", turn.peer, _describe(exc), what)
        if cached is None:
            return user_model_block(turn.peer, facts=facts, budget=self.budget)
        age = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(cached["at"]))
        return user_model_block(
            turn.peer,
            facts=facts,
            answer=cached["text"],
            budget=self.budget,
            answer_heading=f"Last known model of {turn.peer} (from {age}; memory service unavailable now)",
        )

    # --- background writes --------------------------------------------------------------

    async def ingest(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Send both messages to the peer's Honcho session and refresh the cached representation.

        Idempotent by turn id: the local store records each turn whose messages Honcho accepted
        (right after it did), and a recorded turn is not sent again, so a write replayed after a
        crash (the core's turn journal) does not add the messages twice. The window left is a
        kill between Honcho accepting a batch and that record: Honcho has no idempotency key.
        """
        messages = [(turn.id, "user", turn.text), (turn.id, "assistant", reply.text)]
        await asyncio.get_running_loop().run_in_executor(
            self._executor, self._ingest, turn.workspace, turn.peer, turn.thread, messages
        )

    def _ingest(self, workspace: str, peer: str, thread: str, messages: list[tuple[str, str, str]]) -> None:
        key = (workspace, peer, thread)
        with self._lock:
            batch = (self._pending.pop(key, []) + messages)[-MAX_PENDING:]
        honcho = self.client(workspace, fast=False)
        sent = 0
        try:
            already = self.store.sent(workspace, peer, sorted({turn_id for turn_id, _, _ in batch}))
            batch = [m for m in batch if m[0] not in already]
            if not batch:
                return
            user = self._peer(honcho, peer, create=True)
            agent = self._peer(honcho, self.settings.agent_peer, create=True)
            honcho_session = self._session(honcho, peer, thread)
            for start in range(0, len(batch), 100):  # the API takes at most 100 messages per call
                chunk = batch[start : start + 100]
                honcho_session.add_messages(
                    [(user if role == "user" else agent).message(text) for _, role, text in chunk]
                )
                sent = start + len(chunk)
                whole = {m[0] for m in batch[:sent]} - {m[0] for m in batch[sent:]}  # turns with every message sent
                self.store.mark_sent(workspace, peer, thread, sorted(whole))
            representation = user.representation()
            if representation:
                self.store.cache_put(workspace, peer, "representation", representation)
        except Exception as exc:  # noqa: BLE001 - keep the messages for the next turn, say so in the log
            with self._lock:
                self._pending[key] = (batch[sent:] + self._pending.get(key, []))[-MAX_PENDING:]
            logger.warning(
                "identity: Honcho ingest for peer %s failed (%s); %d message(s) kept for retry",
                peer,
                _describe(exc),
                len(self._pending[key]),
            )

    def copy_notes(self, workspace: str, peer: str, texts: list[str], *, author: str) -> None:
        """Write notes as Honcho conclusions about the peer, in the background (agent-authored when not the user's)."""
        if texts:
            self._submit(self._conclude, workspace, peer, list(texts), author)

    def _conclude(self, workspace: str, peer: str, texts: list[str], author: str) -> None:
        honcho = self.client(workspace, fast=False)
        try:
            user = self._peer(honcho, peer, create=True)
            if author == "user":
                view = user.conclusions
            else:
                view = self._peer(honcho, self.settings.agent_peer, create=True).conclusions_of(user.id)
            for start in range(0, len(texts), 100):
                view.create([{"content": text} for text in texts[start : start + 100]])
        except Exception as exc:  # noqa: BLE001
            logger.warning(
                "identity: writing %d conclusion(s) about %s to Honcho failed (%s); they stay in the local store",
                len(texts),
                peer,
                _describe(exc),
            )

    def _submit(self, function: Any, *args: Any) -> None:
        future = self._executor.submit(function, *args)
        self._futures.add(future)
        future.add_done_callback(self._futures.discard)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for background conclusion writes (tests and shutdown)."""
        for future in list(self._futures):
            future.result(timeout=timeout)

    # --- export, forget, status ---------------------------------------------------------

    def export(self, workspace: str, peer: str) -> dict[str, Any]:
        """The local rows plus what Honcho holds: the peer's sessions with messages, conclusions, card."""
        document = super().export(workspace, peer)
        honcho = self.client(workspace, fast=False)
        user = Peer(honcho_id(peer), honcho)
        try:
            sessions = [
                {
                    "id": s.id,
                    "messages": [
                        {"peer": m.peer_id, "content": m.content, "created_at": m.created_at.isoformat()}
                        for m in s.messages()
                    ],
                }
                for s in user.sessions()
            ]
            conclusions = [
                {
                    "id": c.id,
                    "content": c.content,
                    "observer": c.observer_id,
                    "observed": c.observed_id,
                    "session_id": c.session_id,
                    "level": c.level,
                    "created_at": c.created_at.isoformat(),
                }
                for c in self._conclusions(honcho, user.id)
            ]
            document["honcho"] = {
                "workspace": honcho.workspace_id,
                "peer": user.id,
                "sessions": sessions,
                "conclusions": conclusions,
                "card": user.get_card() or [],
            }
        except Exception as exc:  # noqa: BLE001
            document["honcho"] = {"error": _describe(exc)}
            logger.error("identity: exporting %s from Honcho failed: %s", peer, _describe(exc))
        return document

    def _conclusions(self, honcho: Honcho, peer_id: str) -> list[Any]:
        seen: dict[str, Any] = {}
        for field in ("observed_id", "observer_id"):
            for conclusion in honcho.conclusions.list(filters={field: peer_id}):
                seen.setdefault(conclusion.id, conclusion)
        return list(seen.values())

    def forget(self, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
        """Delete the peer's Honcho sessions (or the thread's) and conclusions, then the local rows."""
        self.flush()
        honcho = self.client(workspace, fast=False)
        receipt = {"honcho_sessions": 0, "honcho_conclusions": 0}
        try:
            user = Peer(honcho_id(peer), honcho)
            if thread is not None:
                session_ids = [session_id(peer, thread)]
            else:
                session_ids = [s.id for s in user.sessions()]
                for conclusion in self._conclusions(honcho, user.id):
                    Peer(conclusion.observer_id, honcho).conclusions_of(conclusion.observed_id).delete(conclusion.id)
                    receipt["honcho_conclusions"] += 1
            for sid in session_ids:
                try:
                    HonchoSession(sid, honcho).delete()
                    receipt["honcho_sessions"] += 1
                except NotFoundError:
                    pass
                self._known.discard((honcho.workspace_id, "session", sid))
        except Exception as exc:  # noqa: BLE001 - local data still goes; the receipt says Honcho was not reached
            logger.error("identity: deleting %s from Honcho failed: %s", peer, _describe(exc))
            receipt["honcho_unreachable"] = 1
        with self._lock:
            for key in [k for k in self._pending if k[:2] == (workspace, peer) and thread in (None, k[2])]:
                del self._pending[key]
        return {**receipt, **self.store.delete(workspace, peer, thread)}

    def status(self, workspace: str, peer: str) -> dict[str, Any]:
        """Local counts plus pending messages."""
        with self._lock:
            pending = sum(len(v) for k, v in self._pending.items() if k[:2] == (workspace, peer))
        return {**super().status(workspace, peer), "pending_ingest": pending}

    def close(self) -> None:
        """Finish background writes and close the SDK clients."""
        self._executor.shutdown(wait=True)
        self._dialectic_executor.shutdown(wait=True)
        for honcho in self._clients.values():
            honcho._http.close()  # the SDK offers no public close for its sync client
        super().close()
