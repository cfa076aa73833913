"""A peer's data in Honcho: export it, import it back (idempotently), forget it and wait until it is gone.

Honcho deletes asynchronously: deleting a session answers 202 and its queue deletes the
session's messages and the conclusions derived from them seconds later; a deleted conclusion
is soft-deleted and purged later; no route deletes a peer, so the peer row (its id and
metadata) stays. The forget receipt says exactly that: what Honcho has queued, what Thoth
deleted itself, and what Honcho cannot delete. `wait_forgotten` polls until nothing is left.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from honcho import Peer
from honcho import Session as HonchoSession
from honcho.http.exceptions import NotFoundError

from thoth_core import ThothError

from .honcho_errors import describe, error_kind
from .honcho_ids import NO_DERIVING, honcho_id, session_id  # imported messages come with their conclusions

if TYPE_CHECKING:
    from honcho import Honcho

    from .honcho_backend import HonchoBackend

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.5


def _stamp(value: Any) -> float:
    """Seconds since the epoch of an ISO time or a datetime, to the millisecond."""
    when = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return round((when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp(), 3)


def conclusions_of(honcho: Honcho, peer_id: str) -> list[Any]:
    """Every conclusion the peer observed or is about."""
    seen: dict[str, Any] = {}
    for field in ("observed_id", "observer_id"):
        for conclusion in honcho.conclusions.list(filters={field: peer_id}):
            seen.setdefault(conclusion.id, conclusion)
    return list(seen.values())


def export_honcho(backend: HonchoBackend, workspace: str, peer: str) -> dict[str, Any]:
    """The peer's sessions (with messages), conclusions and card; a ThothError says why Honcho could not be read."""
    honcho = backend.client(workspace, fast=False)
    try:
        if not backend.peer_exists(honcho, peer):
            return {"workspace": honcho.workspace_id, "peer": honcho_id(peer), "sessions": [], "conclusions": []}
        user = Peer(honcho_id(peer), honcho)
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
            for c in conclusions_of(honcho, user.id)
        ]
        card = user.get_card() or []
    except Exception as exc:
        raise ThothError(
            f"cannot export {peer} from Honcho: {describe(exc, backend.settings.base_url)} "
            "(--local-only exports the local rows alone)"
        ) from exc
    return {
        "workspace": honcho.workspace_id,
        "peer": user.id,
        "sessions": sessions,
        "conclusions": conclusions,
        "card": card,
    }


def import_honcho(backend: HonchoBackend, section: dict[str, Any], *, workspace: str, peer: str) -> dict[str, int]:
    """Restore exported sessions, messages and conclusions into Honcho as `peer`; what exists already is skipped."""
    if not isinstance(section, dict) or not isinstance(section.get("sessions", []), list):
        raise ThothError("honcho: expected an object with `sessions` and `conclusions` lists")
    honcho = backend.client(workspace, fast=False)
    source, target = str(section.get("peer") or honcho_id(peer)), honcho_id(peer)

    def who(pid: str) -> str:
        return target if pid == source else pid

    def new_session_id(sid: str) -> str:
        return sid if source == target else f"{target[:40]}-{sid}"[:100]

    added = {"honcho_messages": 0, "honcho_conclusions": 0}
    try:
        backend.honcho_peer(honcho, peer, create=True)
        for item in section.get("sessions", []):
            messages = item.get("messages") or []
            speakers = sorted({who(m["peer"]) for m in messages} | {target})
            for speaker in speakers:
                backend.honcho_peer(honcho, speaker, create=True)
            sid = new_session_id(str(item["id"]))
            honcho.session(sid, peers=speakers)
            session = HonchoSession(sid, honcho)
            have = {(m.peer_id, m.content, _stamp(m.created_at)) for m in session.messages()}
            missing = [m for m in messages if (who(m["peer"]), m["content"], _stamp(m["created_at"])) not in have]
            for start in range(0, len(missing), 100):
                session.add_messages(
                    [
                        Peer(who(m["peer"]), honcho).message(
                            m["content"], created_at=m["created_at"], configuration=NO_DERIVING
                        )
                        for m in missing[start : start + 100]
                    ]
                )
            added["honcho_messages"] += len(missing)
        have_conclusions = {(c.observer_id, c.observed_id, c.content) for c in conclusions_of(honcho, target)}
        for c in section.get("conclusions", []):
            observer, observed = who(c["observer"]), who(c["observed"])
            if (observer, observed, c["content"]) in have_conclusions:
                continue
            backend.honcho_peer(honcho, observer, create=True)
            backend.honcho_peer(honcho, observed, create=True)
            row: dict[str, Any] = {"content": c["content"]}
            if c.get("session_id"):
                row["session_id"] = new_session_id(str(c["session_id"]))
            try:
                Peer(observer, honcho).conclusions_of(observed).create([row])
            except NotFoundError:  # its session was not exported (deleted since): keep the conclusion anyway
                Peer(observer, honcho).conclusions_of(observed).create([{"content": c["content"]}])
            have_conclusions.add((observer, observed, c["content"]))
            added["honcho_conclusions"] += 1
    except ThothError:
        raise
    except Exception as exc:
        raise ThothError(
            f"importing into Honcho stopped: {describe(exc, backend.settings.base_url)}; "
            f"added so far: {added}; the local rows are in. Importing again adds only what is missing."
        ) from exc
    return added


def forget_honcho(backend: HonchoBackend, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
    """Ask Honcho to delete the peer's sessions (or one) and conclusions; a receipt of what was queued or deleted."""
    honcho = backend.client(workspace, fast=False)
    receipt: dict[str, int] = {}
    try:
        if not backend.peer_exists(honcho, peer):
            return receipt
        pid = honcho_id(peer)
        session_ids = [session_id(peer, thread)] if thread is not None else [s.id for s in Peer(pid, honcho).sessions()]
        deleted: set[str] = set()
        for sid in session_ids:
            session = HonchoSession(sid, honcho)
            try:
                messages = sum(1 for _ in session.messages())
                derived = sum(1 for _ in honcho.conclusions.list(filters={"session_id": sid}))
                session.delete()  # 202: Honcho's queue deletes the messages and derived conclusions
            except NotFoundError:
                continue
            deleted.add(sid)
            receipt["honcho_sessions_queued"] = receipt.get("honcho_sessions_queued", 0) + 1
            receipt["honcho_messages_queued"] = receipt.get("honcho_messages_queued", 0) + messages
            receipt["honcho_conclusions_queued"] = receipt.get("honcho_conclusions_queued", 0) + derived
            backend.session_deleted(honcho, sid)
        if thread is None:
            for conclusion in conclusions_of(honcho, pid):
                if conclusion.session_id in deleted:
                    continue  # the session's deletion takes it
                Peer(conclusion.observer_id, honcho).conclusions_of(conclusion.observed_id).delete(conclusion.id)
                receipt["honcho_conclusions_deleted"] = receipt.get("honcho_conclusions_deleted", 0) + 1
            receipt["honcho_peer_kept"] = 1  # Honcho has no route to delete a peer: its id and metadata stay
    except Exception as exc:  # noqa: BLE001 - local data still goes; the receipt says what Honcho did not do
        logger.error("identity: deleting %s from Honcho failed: %s", peer, describe(exc, backend.settings.base_url))
        receipt[f"honcho_{error_kind(exc)}"] = 1
    return receipt


def left_in_honcho(backend: HonchoBackend, workspace: str, peer: str, thread: str | None) -> dict[str, int]:
    """What Honcho still holds of the peer (or of one thread): sessions, messages, conclusions."""
    honcho = backend.client(workspace, fast=False)
    if not backend.peer_exists(honcho, peer):
        return {"sessions": 0, "messages": 0, "conclusions": 0}
    pid = honcho_id(peer)
    if thread is not None:
        sessions = [session_id(peer, thread)]
    else:
        sessions = [s.id for s in Peer(pid, honcho).sessions()]
    left = {"sessions": 0, "messages": 0, "conclusions": 0}
    for sid in sessions:
        try:
            count = sum(1 for _ in HonchoSession(sid, honcho).messages())
        except NotFoundError:
            continue
        left["sessions"] += 1 if thread is None or count else 0
        left["messages"] += count
        left["conclusions"] += sum(1 for _ in honcho.conclusions.list(filters={"session_id": sid}))
    if thread is None:
        left["conclusions"] = len(conclusions_of(honcho, pid))
    return left


def wait_forgotten(
    backend: HonchoBackend, workspace: str, peer: str, thread: str | None, *, timeout: float
) -> dict[str, int]:
    """Poll until Honcho's queue has deleted the peer's data (deleting late-derived conclusions too); final counts."""
    started = time.monotonic()
    honcho = backend.client(workspace, fast=False)
    late = 0
    while True:
        left = left_in_honcho(backend, workspace, peer, thread)
        if not any(left.values()) or time.monotonic() - started > timeout:
            break
        if left["sessions"] == 0 and left["messages"] == 0 and thread is None:
            for conclusion in conclusions_of(honcho, honcho_id(peer)):  # derived after the sessions were listed
                Peer(conclusion.observer_id, honcho).conclusions_of(conclusion.observed_id).delete(conclusion.id)
                late += 1
        time.sleep(POLL_SECONDS)
    result = {f"honcho_{what}_left": n for what, n in left.items()}
    result["honcho_wait_seconds"] = round(time.monotonic() - started)
    if late:
        result["honcho_late_conclusions_deleted"] = late
    if any(left.values()):
        result["honcho_wait_timed_out"] = 1
    return result
