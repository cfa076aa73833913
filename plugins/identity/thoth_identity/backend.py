"""What both identity backends share: hard facts and notes, agent observations, export, forget.

The local SQLite store is the layer's own record in either backend: hard facts always live
there (a knowledge graph needs validity windows Honcho does not keep), and so do notes and
agent-authored observations, which the Honcho backend also copies into Honcho.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from thoth_core import ContextBlock, Reply, Session, ThothError, Turn

from .facts import parse_remember
from .settings import IdentitySettings
from .store import IdentityStore

logger = logging.getLogger(__name__)

EXPORT_FORMAT = "thoth-identity/1"


class IdentityBackend:
    """Base class: the store-backed operations; subclasses add context and ingest."""

    name = "base"

    def __init__(self, runtime: Any, settings: IdentitySettings, store: IdentityStore) -> None:
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

    async def context(self, turn: Turn, session: Session) -> ContextBlock | None:
        """The `user-model` block for this turn."""
        raise NotImplementedError

    async def ingest(self, turn: Turn, reply: Reply, session: Session) -> None:
        """Record a finished turn (in the background)."""
        raise NotImplementedError

    # --- writes both backends share ------------------------------------------------------

    def remember(self, workspace: str, peer: str, text: str, *, source: str) -> dict[str, Any]:
        """Store what a person asked to remember: a hard fact if it parses as one, else a note."""
        text = text.strip()
        if not text:
            raise ThothError("nothing to remember; try `/remember my name is Ada` or `/remember timezone: CET`")
        parsed = parse_remember(text)
        if parsed is None:
            self.store.add_observation(
                workspace, peer, text, kind="explicit", author="user", confidence=1.0, source=source
            )
            self.copy_notes(workspace, peer, [text], author="user")
            return {"kind": "note", "text": text, "message": f"Noted about {peer}: {text}"}
        outcome = self.store.set_fact(
            workspace,
            peer,
            parsed.predicate,
            parsed.value,
            confidence=1.0,
            source=source,
            multi_valued=parsed.multi_valued,
        )
        label = parsed.predicate.replace("_", " ")
        if outcome["unchanged"]:
            message = f"Already known: {label} = {parsed.value}"
        else:
            was = ", ".join(old["object"] for old in outcome["superseded"])
            message = f"Remembered: {label} = {parsed.value}" + (f" (was: {was})" if was else "")
            self.copy_notes(workspace, peer, [f"{peer}'s {label}: {parsed.value}"], author="user")
        return {
            "kind": "fact",
            "predicate": parsed.predicate,
            "value": parsed.value,
            "superseded": [old["object"] for old in outcome["superseded"]],
            "message": message,
        }

    def note_reaction(self, workspace: str, peer: str, text: str, *, turn_id: str, actor: str) -> dict[str, Any]:
        """Keep a message someone reacted to as a note about the peer, never as a hard fact."""
        text = text.strip()
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
        added = [
            t
            for t in texts
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
        """Add an exported document's rows to a peer; returns counts added."""
        if document.get("format") != EXPORT_FORMAT:
            raise ThothError(
                f"not a Thoth identity export (format {document.get('format')!r}, expected {EXPORT_FORMAT})"
            )
        added = self.store.import_rows(workspace, peer, document)
        notes = [o["content"] for o in document.get("observations", [])]
        self.copy_notes(workspace, peer, notes, author="import")
        return added

    def forget(self, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
        """Delete what the layer holds about a peer (or one thread); a receipt of counts."""
        return self.store.delete(workspace, peer, thread)

    def status(self, workspace: str, peer: str) -> dict[str, Any]:
        """Counts for status displays."""
        return {"layer": "identity", "backend": self.name, **self.store.counts(workspace, peer)}

    def close(self) -> None:
        """Release what the backend holds."""
        self.store.close()
