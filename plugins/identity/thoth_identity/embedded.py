"""The embedded backend (default): the identity store, derivation by the configured model, full-text dialectic.

Per turn, in the background: both messages are stored (once per turn id, so a write replayed
after a crash adds nothing) and the peer's message is queued; the deriver (`deriver.py`) has the
model (`[plugins.identity] model`, else the chat model) derive observations and high-confidence
hard facts from the waiting messages, several turns in one request by default; only those the
write policy shows are kept (`policy.screen_derivation`: no order to the assistant, nothing it
cannot read, nothing drawn from a message that asks to set rules aside), the others are counted
as withheld. Before each
model call: the peer's current facts and the observations most relevant to the message (FTS5
BM25, or PostgreSQL's ts_rank) that the write policy shows, plus a model synthesis when a model
is configured and the deadline leaves time (paused for a while after several consecutive
timeouts: a model that slow wastes every call).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any

from thoth_core import ContextBlock, Reply, Session, ThothError, Turn

from . import pending
from .backend import IdentityBackend
from .deriver import Deriver
from .graph import block_facts
from .policy import visible
from .render import user_model_block

logger = logging.getLogger(__name__)

SYNTHESIS_MARGIN = 0.25  # seconds kept free before the core's deadline (the layer's `until` already keeps them)
UNTIL_MARGIN = 0.05  # seconds kept free before `until` for building the block
SYNTHESIS_TIMEOUTS_BEFORE_PAUSE = 3  # consecutive timeouts that pause synthesis
SYNTHESIS_PAUSE = 300.0  # seconds synthesis is skipped after that
RECENT_WHEN_UNMATCHED = 3


class EmbeddedBackend(IdentityBackend):
    """Identity memory in the Thoth home, no server."""

    name = "embedded"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._warned_no_model = False
        self._synthesis_timeouts = 0
        self._synthesis_paused_until = 0.0
        self._model_lock = threading.Lock()
        self._built: Any | None = None  # the model once built
        self._own_model: Any | None = None  # `[plugins.identity] model`, once built
        self._own_model_failed = False  # it could not be built (said once): the chat model serves
        self.deriver = Deriver(self)

    def model(self) -> Any | None:
        """The configured model, or None (logged once) when there is none (blocking: building it may import)."""
        with self._model_lock:
            self._built = self._model()
            return self._built

    def _model(self) -> Any | None:
        if (self.settings.model or self.settings.model_options) and not self._own_model_failed:
            if self._own_model is None:
                self._own_model = self._build_own_model()
            if self._own_model is not None:
                return self._own_model
        try:
            if self.runtime.model_name() is None:
                raise ThothError("no model is configured")
            return self.runtime.model()
        except ThothError as exc:
            if not self._warned_no_model:
                self._warned_no_model = True
                logger.warning(
                    "identity: %s; observations will not be derived from messages "
                    "(explicit facts from /remember still work)",
                    str(exc).split(". ")[0],
                )
            return None

    def _build_own_model(self) -> Any | None:
        """`[plugins.identity] model` (a registered provider) with `model_options` over its `[models.NAME]`;
        None, said in one line, when it is unknown or cannot be built (the chat model, or none, serves)."""
        name = self.settings.model or self.runtime.model_name()
        try:
            if name is None or name not in self.runtime.models:
                available = ", ".join(sorted(self.runtime.models)) or "none"
                raise ThothError(f"{name!r} is not a registered model provider (available: {available})")
            options = {**self.runtime.config.section(f"models.{name}"), **self.settings.model_options}
            return self.runtime.models[name](self.runtime, options)
        except Exception as exc:  # noqa: BLE001 - a bad choice costs the cheaper model, never derivation
            self._own_model_failed = True
            fallback = self.runtime.model_name()
            logger.warning(
                "identity: [plugins.identity] model: %s; using %s",
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                f"the chat model ({fallback})" if fallback else "no model (nothing is derived)",
            )
            return None

    def retrieve(self, workspace: str, peer: str, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The peer's current facts (relevant first), those of entities the message names, and relevant observations
        (derived ones only when the write policy shows them)."""
        store, top_k = self.store, self.settings.top_k
        found = store.search_observations(workspace, peer, text, limit=top_k)
        held = store.current_facts(workspace, peer)
        facts, observations = visible(store, workspace, peer, facts=held, observations=found)
        if not observations:
            recent = store.recent_observations(workspace, peer, limit=min(RECENT_WHEN_UNMATCHED, top_k))
            observations = visible(store, workspace, peer, observations=recent)[1]
        return block_facts(facts, peer, text), observations

    async def context(self, turn: Turn, session: Session, *, until: float | None = None) -> ContextBlock | None:
        """Facts, then a synthesis when there is time (until `until`), then the relevant observations."""
        until = until if until is not None else time.monotonic() + self.deadline - SYNTHESIS_MARGIN
        facts, observations = await asyncio.to_thread(self.retrieve, turn.workspace, turn.peer, turn.text)
        answer = None
        if self.settings.synthesis and observations:
            answer = await self._synthesis(turn, facts, observations, until)
        return user_model_block(turn.peer, facts=facts, answer=answer, observations=observations, budget=self.budget)

    async def _synthesis(
        self, turn: Turn, facts: list[dict[str, Any]], observations: list[dict[str, Any]], until: float
    ) -> str | None:
        if self.runtime.model_name() is None or time.monotonic() < self._synthesis_paused_until:
            return None
        model = self._built
        if model is None:
            try:  # building a provider (imports, clients) runs in a thread and only for the time the turn has
                model = await asyncio.wait_for(
                    asyncio.shield(asyncio.to_thread(self.model)), until - time.monotonic() - UNTIL_MARGIN - 0.2
                )
            except TimeoutError:
                logger.info("identity: the model for synthesis is not ready yet; using the retrieved observations")
                return None
        remaining = until - time.monotonic() - UNTIL_MARGIN
        if model is None or remaining < 0.2:
            return None
        known = user_model_block(turn.peer, facts=facts, observations=observations, budget=self.budget)
        from .derive import synthesize  # its pydantic schemas load when first asked for, not on every start

        try:
            answer = await asyncio.wait_for(
                synthesize(model, peer=turn.peer, known=known.text if known else "", user_text=turn.text), remaining
            )
        except TimeoutError:
            logger.info(
                "identity: synthesis for %s took over %.2fs; using the retrieved observations", turn.peer, remaining
            )
            self._synthesis_timed_out()
        except Exception as exc:  # noqa: BLE001 - the turn goes on with retrieval alone
            logger.warning("identity: synthesis for %s failed: %s: %s", turn.peer, type(exc).__name__, exc)
        else:
            self._synthesis_timeouts = 0
            return answer or None
        return None

    def _synthesis_timed_out(self) -> None:
        """Count a timeout; after several in a row, skip synthesis for a while (logged once)."""
        self._synthesis_timeouts += 1
        if self._synthesis_timeouts >= SYNTHESIS_TIMEOUTS_BEFORE_PAUSE:
            self._synthesis_timeouts = 0
            self._synthesis_paused_until = time.monotonic() + SYNTHESIS_PAUSE
            logger.warning(
                "identity: synthesis timed out %d times in a row; skipping it for %.0fs (retrieval only)",
                SYNTHESIS_TIMEOUTS_BEFORE_PAUSE,
                SYNTHESIS_PAUSE,
            )

    async def ingest(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Store both messages, then queue the peer's message for derivation (`deriver.py` says when it runs).

        Idempotent by turn id: a replayed write (after a crash) finds the messages stored, and
        queues the message again only when the deriver had not finished with it.
        """
        key = (turn.workspace, turn.peer)
        self.deriver.writing[key] += 1  # a session's end waits for this write before deriving what waits
        try:
            message_id, new = await asyncio.to_thread(self._store_messages, turn, reply, session)
            if not self.settings.derive:
                return
            if not new and await asyncio.to_thread(self.store.derived_from, *key, message_id):
                return
            if await asyncio.to_thread(self.model) is None:  # the no-model path: nothing is derived (logged once)
                return
            await self.deriver.turn_stored(*key, message_id)
        finally:
            self.deriver.writing[key] -= 1

    async def session_end(self, session: Session) -> None:
        """Derive the session's peer's waiting turns (`derive_at_session_end`)."""
        if self.settings.derive and self.settings.derive_at_session_end:
            await self.deriver.session_ended(session.workspace, session.peer)

    def status(self, workspace: str, peer: str) -> dict[str, Any]:
        """The store's counts, and how many of the peer's turns wait for the deriver."""
        return {**super().status(workspace, peer), "derive_waiting": pending.waiting(self.store, workspace, peer)[0]}

    def close(self) -> None:
        """Stop the idle timers (waiting turns stay queued in the store), then close the store."""
        self.deriver.close()
        super().close()

    def _store_messages(self, turn: Turn, reply: Reply, session: Session) -> tuple[int, bool]:
        """Store the turn's two messages once; the user message's id, and whether it was new."""
        new = self.store.turn_message(turn.workspace, turn.peer, turn.id, "user") is None
        common = {"thread": turn.thread, "session_id": session.id, "turn_id": turn.id}
        message_id = self.store.add_message(
            turn.workspace, turn.peer, role="user", content=turn.text, at=turn.created_at, **common
        )
        self.store.add_message(
            turn.workspace, turn.peer, role="assistant", content=reply.text, at=reply.finished_at, **common
        )
        return message_id, new
