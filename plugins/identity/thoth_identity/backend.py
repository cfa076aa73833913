"""What both identity backends share: hard facts and notes, agent observations, export, forget.

The identity store (SQLite, or the shared PostgreSQL) is the layer's own record in either
backend: hard facts always live there (a knowledge graph needs validity windows Honcho does not
keep), and so do notes and agent-authored observations, which the Honcho backend also copies
into Honcho.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from thoth_core import ContextBlock, Reply, Session, ThothError, Turn
from thoth_core.redact import redactor_of

from .facts import ParsedFact, parse_facts
from .graph import assert_fact, block_facts, check_triple, peer_names
from .policy import screen_answer, shown_facts, visible
from .render import TAG, user_model_block
from .settings import IdentitySettings
from .store import IdentityStore

if TYPE_CHECKING:
    from thoth_core import Runtime

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "thoth-identity/1"
_NUMBER = (int, float)
# Per table: field -> (accepted types, required). Other fields are ignored on import.
EXPORT_FIELDS: dict[str, dict[str, tuple[tuple[type, ...], bool]]] = {
    "messages": {"role": ((str,), True), "content": ((str,), True), "at": (_NUMBER, True), "thread": ((str,), False)},
    "outbox": {  # messages Honcho had not accepted yet
        "thread": ((str,), True),
        "turn_id": ((str,), True),
        "role": ((str,), True),
        "content": ((str,), True),
        "at": (_NUMBER, True),
    },
    "observations": {
        "content": ((str,), True),
        "kind": ((str,), False),
        "author": ((str,), False),
        "source": ((str,), False),
        "confidence": (_NUMBER, False),
        "created_at": (_NUMBER, False),
    },
    "facts": {
        "predicate": ((str,), True),
        "object": ((str,), True),
        "valid_from": (_NUMBER, True),
        "valid_to": (_NUMBER, False),
        "confidence": (_NUMBER, False),
        "subject": ((str,), False),
        "source": ((str,), False),
    },
}


STALE_NOTE = "memory service unavailable now"


def last_model(store: IdentityStore, workspace: str, peer: str) -> dict[str, Any] | None:
    """The last good model of a peer kept locally (dialectic or synthesis answer, else Honcho's representation)."""
    return store.cache_get(workspace, peer, "dialectic") or store.cache_get(workspace, peer, "representation")


def fallback_block(
    peer: str, *, facts: list[dict[str, Any]], cached: dict[str, Any] | None, budget: int, text: str = ""
) -> ContextBlock:
    """The stale block: hard facts and the last known model, saying the live model is unavailable (blocking:
    what was derived or came from a memory server is judged by the write policy)."""
    facts = shown_facts(facts, peer)
    answer = screen_answer(cached["text"], peer)[0] if cached is not None else None
    if cached is not None and answer:
        age = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(cached["at"]))
        heading = f"Last known model of {peer} (from {age}; {STALE_NOTE})"
    else:
        heading, answer = f"Model of {peer}", f"not available ({STALE_NOTE}); only the hard facts, if any, are known"
    block = user_model_block(
        peer, facts=block_facts(facts, peer, text), answer=answer, answer_heading=heading, budget=budget
    )
    return block or ContextBlock(tag=TAG, text=f"Model of {peer}: {STALE_NOTE}.", layer="identity")


def validate_export(document: Any) -> None:
    """Check an export's shape before anything is written; a ThothError names the bad field."""
    if not isinstance(document, dict) or document.get("format") != EXPORT_FORMAT:
        found = document.get("format") if isinstance(document, dict) else type(document).__name__
        raise ThothError(f"not a Thoth identity export (format {found!r}, expected {EXPORT_FORMAT})")
    for table, fields in EXPORT_FIELDS.items():
        rows = document.get(table, [])
        if not isinstance(rows, list):
            raise ThothError(f"{table}: expected a list, got {type(rows).__name__}")
        for index, row in enumerate(rows):
            where = f"{table}[{index}]"
            if not isinstance(row, dict):
                raise ThothError(f"{where}: expected an object, got {row!r:.60}")
            for name, (types, required) in fields.items():
                value = row.get(name)
                if value is None:
                    if required:
                        raise ThothError(f"{where}.{name}: missing")
                elif not isinstance(value, types) or isinstance(value, bool):
                    expected = "a number" if types is _NUMBER else "a string"
                    raise ThothError(f"{where}.{name}: expected {expected}, got {value!r:.60}")
            if table == "facts" and (
                problem := check_triple(row.get("subject") or "", row["predicate"], row["object"])
            ):
                raise ThothError(f"{where}: {problem}")


class IdentityBackend:
    """Base class: the store-backed operations; subclasses add context and ingest."""

    name = "base"
    last_kind = "live"  # `live`, or `fallback` when the last block was the stale one
    keeps_unsent_as_messages = True  # an import's messages Honcho had not taken become this backend's own

    def __init__(self, runtime: Runtime, settings: IdentitySettings, store: IdentityStore) -> None:
        self.runtime = runtime
        self.settings = settings
        self.store = store

    @property
    def budget(self) -> int:
        """Tokens the identity layer may use in the prompt."""
        return int(self.runtime.config.layer_budgets.get("identity", 800))

    @property
    def deadline(self) -> float:
        """Seconds the pre-spawn hook may take."""
        return float(self.runtime.deadline_for("identity"))

    def start(self) -> None:
        """Called once the backend is made, in a worker thread (the Honcho one sends what waits in its outbox)."""

    async def context(self, turn: Turn, session: Session, *, until: float | None = None) -> ContextBlock | None:
        """The `user-model` block for this turn, ready by `until` (time.monotonic) when given."""
        raise NotImplementedError

    def fallback(self, turn: Turn) -> ContextBlock:
        """The stale block from the local store (blocking: call from a worker thread)."""
        held = self.store.current_facts(turn.workspace, turn.peer)
        facts = visible(self.store, turn.workspace, turn.peer, facts=held)[0]
        cached = last_model(self.store, turn.workspace, turn.peer)
        return fallback_block(turn.peer, facts=facts, cached=cached, budget=self.budget, text=turn.text)

    async def ingest(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Record a finished turn (in the background)."""
        raise NotImplementedError

    async def session_end(self, session: Session) -> None:
        """A session of the peer ended (in the background); the embedded backend derives what waits."""

    # --- writes both backends share ------------------------------------------------------

    def remember_text(self, text: str) -> str:
        """The text `/remember` may keep, stripped; a ThothError (one line) if it is empty, not text or a secret."""
        text = text.strip()
        if not text:
            raise ThothError("nothing to remember; try `/remember my name is Ada` or `/remember I work at Acme`")
        bad = next((c for c in text if c == "\x00" or "\ud800" <= c <= "\udfff"), None)
        if bad is not None:  # neither SQLite (UTF-8) nor PostgreSQL can keep it
            what = "a NUL character" if bad == "\x00" else f"a lone surrogate U+{ord(bad):04X}"
            raise ThothError(f"not stored: the text holds {what} at character {text.index(bad) + 1}, which is not text")
        secrets = redactor_of(self.runtime).find_secrets(text)  # the runtime's `[privacy]` policy
        if secrets:
            raise ThothError(
                f"not stored: that holds a secret ({', '.join(secrets)}); secrets are never kept in memory"
            )
        return text

    def remember(
        self,
        workspace: str,
        peer: str,
        text: str,
        *,
        source: str,
        facts: list[ParsedFact] | None = None,
        complete: bool = True,
    ) -> dict[str, Any]:
        """Keep what a person asked to remember: the facts it states (read by rule unless given), else a note.

        `complete=False` (the facts do not say all the text does) keeps the text as a note as well.
        """
        text = self.remember_text(text)
        read = parse_facts(text) if facts is None else facts
        facts = [f for f in read if check_triple(f.subject or "", f.predicate, f.value) is None]
        complete = complete and len(facts) == len(read)  # a fact too long to keep: the note keeps it
        if self._links_to_self(workspace, peer, facts):
            facts = []  # `my sister Ann lives in Oslo` said by ann: Ann is not ann, but her facts would be
        if not facts or not complete:
            self.store.add_observation(
                workspace, peer, text, kind="explicit", author="user", confidence=1.0, source=source
            )
            self.copy_notes(workspace, peer, [text], author="user")
        if not facts:
            return {"kind": "note", "text": text, "message": f"Noted about {peer}: {text}"}
        stored = [self._remember_fact(workspace, peer, fact, source=source) for fact in facts]
        said = "; ".join(s["said"] for s in stored)
        first = stored[0]
        if all(s["unchanged"] for s in stored):
            message = f"Already known: {said}"
        else:
            message = f"Remembered: {said}"
        if not complete:
            message += f" (and noted: {text})"
        return {
            "kind": "fact",
            "subject": first["subject"],
            "predicate": first["predicate"],
            "value": first["value"],
            "superseded": first["superseded"],
            "facts": [{k: v for k, v in s.items() if k != "said"} for s in stored],
            "message": message,
        }

    def _links_to_self(self, workspace: str, peer: str, facts: list[ParsedFact]) -> bool:
        """True when the text links the speaker to someone of the speaker's own name and states that one's facts."""
        linked = {" ".join(f.value.split()).casefold() for f in facts if f.subject is None}
        about = {" ".join(f.subject.split()).casefold() for f in facts if f.subject is not None}
        if not linked & about:
            return False
        return bool(linked & about & peer_names(self.store.current_facts(workspace, peer), peer))

    def _remember_fact(self, workspace: str, peer: str, fact: ParsedFact, *, source: str) -> dict[str, Any]:
        """Store one fact a person stated; what was stored, and how to say it (`sister = Ann (was: ...)`)."""
        outcome = assert_fact(
            self.store,
            workspace,
            peer,
            subject=fact.subject,
            predicate=fact.predicate,
            value=fact.value,
            confidence=1.0,
            source=source,
        )
        subject = outcome["fact"]["subject"]
        words = fact.predicate.replace("_", " ")
        label = words if subject == peer else f"{subject}'s {words}"
        superseded = [old["object"] for old in outcome["superseded"]]
        said = f"{label} = {fact.value}"
        if not outcome["unchanged"]:
            said += f" (was: {', '.join(superseded)})" if superseded else ""
            whose = f"{peer}'s {label}" if subject == peer else f"{label} (said by {peer})"
            self.copy_notes(workspace, peer, [f"{whose}: {fact.value}"], author="user")
        return {
            "subject": subject,
            "predicate": fact.predicate,
            "value": fact.value,
            "superseded": superseded,
            "unchanged": outcome["unchanged"],
            "said": said,
        }

    def note_reaction(self, workspace: str, peer: str, text: str, *, turn_id: str, actor: str) -> dict[str, Any]:
        """Keep a message someone reacted to as a note about the peer, never as a hard fact."""
        text = redactor_of(self.runtime).redact(text.strip())
        new = self.store.add_observation(
            workspace, peer, text, kind="noted", author=actor, confidence=0.8, source=f"reaction:{turn_id}"
        )
        if new is not None:
            self.copy_notes(workspace, peer, [text], author="agent")
        return {"kind": "note", "text": text, "message": f"Noted about {peer}: {text}"}

    def add_observations(
        self, workspace: str, peer: str, texts: list[str], *, author: str, source: str, confidence: float = 0.6
    ) -> int:
        """Store observations authored by the agent (e.g. reflection); returns how many were new."""
        redact = redactor_of(self.runtime).redact
        added = [
            t
            for t in map(redact, texts)
            if self.store.add_observation(
                workspace, peer, t, kind="deductive", author=author, confidence=confidence, source=source
            )
            is not None
        ]
        self.copy_notes(workspace, peer, added, author=author)
        return len(added)

    def copy_notes(self, workspace: str, peer: str, texts: list[str], *, author: str) -> None:
        """Copy notes to a remote backend; the embedded one holds them already."""

    # --- export, import, forget, status --------------------------------------------------

    def export(self, workspace: str, peer: str) -> dict[str, Any]:
        """One JSON-ready document with everything the layer holds about a peer."""
        return {
            "format": EXPORT_FORMAT,
            "exported_at": time.time(),
            "backend": self.name,
            "workspace": workspace,
            "peer": peer,
            **self.store.export_rows(workspace, peer),
        }

    def import_document(self, document: dict[str, Any], *, workspace: str, peer: str) -> dict[str, int]:
        """Add an exported document's rows to a peer, all or nothing; returns counts added."""
        validate_export(document)
        unsent = document.get("outbox", []) if self.keeps_unsent_as_messages else []
        rows = {**document, "messages": [*document.get("messages", []), *unsent]}
        added = self.store.import_rows(workspace, peer, rows)
        notes = [o["content"] for o in document.get("observations", [])]
        self.copy_notes(workspace, peer, notes, author="import")
        return added

    def forget(self, workspace: str, peer: str, thread: str | None, *, wait: float = 0.0) -> dict[str, int]:
        """Delete what the layer holds about a peer (or one thread); a receipt of counts (`wait`: for remote queues)."""
        return self.store.delete(workspace, peer, thread)

    def status(self, workspace: str, peer: str) -> dict[str, Any]:
        """Counts for status displays."""
        return {"layer": "identity", "backend": self.name, **self.store.counts(workspace, peer)}

    def close(self) -> None:
        """Release what the backend holds."""
        self.store.close()
