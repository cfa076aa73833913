"""Reflection's own writers of a result: auto-memory notes, persona observations, check-ins.

Unflagged memory notes are appended (redacted again, in case another caller skipped it) to
the persona memory file; flagged ones, like every persona observation, go to the queue.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from thoth_core import Session
from thoth_core.redact import redact

from . import queue
from .memory import MemoryFile
from .schema import check_at_seconds, utc_day
from .settings import State

logger = logging.getLogger(__name__)


def write_result(st: State, result: dict[str, Any], session: Session) -> dict[str, Any]:
    """Write reflection's parts of a result; returns what was done."""
    run_id = result.get("run_id")
    flags = result.get("flags") or {}
    note_flags = flags.get("memory_notes") or {}
    notes = result.get("memory_notes") or []
    clean = [redact(n) for i, n in enumerate(notes) if str(i) not in note_flags]
    held = [
        queue.hold(
            st,
            kind="memory-note",
            title=f"memory note: {n[:60]}",
            text=redact(n),
            session=session,
            run_id=run_id,
            flags=note_flags[str(i)],
        )
        for i, n in enumerate(notes)
        if str(i) in note_flags
    ]
    added = (
        MemoryFile(st.path(st.settings.memory_file)).append_notes(
            clean, day=utc_day(time.time()), owner=(session.peer, session.workspace)
        )
        if clean
        else []
    )
    if added:
        st.store.audit(
            "memory_notes_written",
            {"file": st.settings.memory_file, "notes": added},
            run_id=run_id,
            session_id=session.id,
        )
    observation_flags = flags.get("persona_observations") or {}
    observed = [
        queue.observe(
            st, text=redact(text), session=session, run_id=run_id or "", flags=observation_flags.get(str(i), [])
        )
        for i, text in enumerate(result.get("persona_observations") or [])
    ]
    check_in = None
    if result.get("next_check_at"):
        check_in = f"{session.id}:{run_id}"
        at = check_at_seconds(result["next_check_at"])
        text = "Checking back in on this thread, as planned at the end of our last session. How is it going?"
        st.store.add_check_in(check_in, at=at, text=text, session=session, run_id=run_id or "")
        st.store.audit(
            "check_in_scheduled",
            {"at": result["next_check_at"], "thread": session.thread},
            run_id=run_id,
            session_id=session.id,
        )
    done = {"notes_written": len(added), "notes_held": held, "observations": observed, "check_in": check_in}
    logger.info("reflection: session %s: %s", session.id, done)
    return done
