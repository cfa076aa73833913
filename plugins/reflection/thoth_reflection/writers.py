"""Reflection's own writers of a result: auto-memory notes, persona observations, check-ins.

A memory note is appended (redacted again, in case another caller skipped it) to the persona
memory file only when the firewall did not flag it and its risk tier (`tiers`) is one the policy
(`[plugins.reflection] auto_apply`) lets apply; the others, like every persona observation, go
to the queue with their tier. With `third_party = "drop"` notes about other people are dropped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from thoth_core import Session
from thoth_core.redact import redactor_of

from . import queue, tiers
from .schema import check_at_seconds, utc_day
from .settings import State

logger = logging.getLogger(__name__)


def write_result(st: State, result: dict[str, Any], session: Session) -> dict[str, Any]:
    """Write reflection's parts of a result; returns what was done."""
    run_id = result.get("run_id")
    flags = result.get("flags") or {}
    note_flags = flags.get("memory_notes") or {}
    notes = result.get("memory_notes") or []
    redact = redactor_of(st).redact  # the runtime's `[privacy]` policy
    known = st.store.known_peers() | set(st.founders)
    proposal_tiers = result.get("tiers") or tiers.tiers_for(result, peer=session.peer, known_peers=known)
    note_tiers = proposal_tiers.get("memory_notes") or {}
    clean: list[str] = []
    held: list[str] = []
    for i, note in enumerate(notes):
        tier = note_tiers.get(str(i), "general")
        hold_with = tiers.hold_flags(tier, note_flags.get(str(i), []), st.settings.auto_apply)
        if not hold_with:
            clean.append(redact(note))
        elif tier == "other-peer" and st.settings.third_party == "drop":
            st.store.audit("dropped", {"kind": "memory-note", "tier": tier}, run_id=run_id, session_id=session.id)
        else:
            title = f"memory note: {note[:60]}"
            held.append(
                queue.hold(
                    st,
                    kind="memory-note",
                    title=title,
                    text=redact(note),
                    session=session,
                    run_id=run_id,
                    flags=hold_with,
                    tier=tier,
                )
            )
    added = (
        st.memory().append_notes(clean, day=utc_day(time.time()), owner=(session.peer, session.workspace))
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
    observation_tiers = proposal_tiers.get("persona_observations") or {}
    observed = [
        queue.observe(
            st,
            text=redact(text),
            session=session,
            run_id=run_id or "",
            flags=observation_flags.get(str(i), []),
            tier=observation_tiers.get(str(i), ""),
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
