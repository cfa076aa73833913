"""The promises of docs/promises.md as checks: each compares what the home holds with the ledger.

Each check returns the broken promises as one line each (empty: it holds). They read an
`Observation` (every layer after recovery, through the runtime's own bundle export), the home's
raw files, and, with PostgreSQL, every table of the shared database.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from typing import Any

from inv_harness import MARKER, Ledger, Observation, World, float16_slices

from thoth_core.types import CUT_SHORT


def kept(ledger: Ledger, seen: Observation, under: dict[str, bool], backend: str) -> list[str]:
    """Every accepted user message is in every layer (and the reply as far as it was shown), once.

    The episode and the working transcript hold the reply as shown: a turn shown whole after it was
    kept cut short (re-run with its turn id) holds the whole reply. `under` says for which faults
    around a message it is checked (`"fault@backend"` first, then `"fault"`; a fault not named: checked).
    """
    episodes = seen.sections.get("episodic", [])
    turns = [e for s in seen.sections.get("working", []) for e in s.get("transcript", []) if e.get("type") == "turn"]
    working = seen.texts("working")
    identity = seen.texts("identity") + "\n".join(seen.honcho_messages)
    broken = []
    for message in ledger.messages.values():
        if not message.accepted or message.forgotten or not switched_on(under, message.fault, backend):
            continue
        own = [e for e in episodes if message.marker in str(e.get("user", ""))]
        found = {"episodic": bool(own), "working": message.marker in working, "identity": message.marker in identity}
        missing = [layer for layer in message.layers if not found[layer]]
        where = f"{message.marker} ({message.peer}/{message.thread}/{message.agent})"
        replies = [str(e.get("assistant", "")) for e in own]
        transcribed = [str(e.get("assistant", "")) for e in turns if message.marker in str(e.get("user", ""))]
        if missing:
            broken.append(f"kept: {where} lost in {missing}")
        elif len(own) > 1 or len(transcribed) > 1:
            broken.append(
                f"kept: {where} kept more than once: {len(own)} episodes, {len(transcribed)} transcript turns"
            )
        elif message.shown.strip() and not any(message.shown.strip() in reply for reply in replies):
            broken.append(f"kept: {where}: the reply as shown ({message.shown.strip()[:40]!r}) is not in its episode")
        elif message.shown.strip() and transcribed and message.shown.strip() not in transcribed[0]:
            broken.append(
                f"kept: {where}: the reply as shown ({message.shown.strip()[:40]!r}) is not in its transcript"
            )
        elif message.fault == "kill" and not message.complete and not any(CUT_SHORT in reply for reply in replies):
            broken.append(f"kept: {where}: the reply of a killed turn is not marked {CUT_SHORT!r}: {replies[:1]}")
    for marker, (peer, gone) in ledger.remembered.items():
        if not gone and marker not in identity:
            broken.append(f"kept: /remember {marker} of {peer} not in the identity layer")
    return broken


def switched_on(switches: dict[str, bool], fault: str | None, backend: str) -> bool:
    """Whether a check holds under a fault on a backend: `"fault@backend"`, else `"fault"`, else yes."""
    if fault is None:
        return True
    return switches.get(f"{fault}@{backend}", switches.get(fault, True))


def erased(world: World, ledger: Ledger, *, threads: bool = True) -> list[str]:
    """No byte of forgotten text or vectors in any file of the home, nor in any table of the shared database.

    With `threads=False`, what `thoth forget --thread` forgot is not looked for (only whole peers).
    """
    words = ledger.forgotten_markers(threads=threads)
    gone = [m for m in ledger.messages.values() if m.forgotten and (threads or not m.forgotten_with_thread)]
    vectors = [(m.marker, blob) for m in gone for blob in m.vectors]
    if not words and not vectors:
        return []
    needles = [(w, w.encode()) for w in words]
    needles += [(f"vector of {marker}", piece) for marker, blob in vectors for piece in float16_slices(blob)]
    broken = []
    for path in world.home_files():
        try:
            data = path.read_bytes()
        except OSError:
            continue
        hits = sorted({name for name, needle in needles if needle in data})
        if hits:
            broken.append(f"erased: {path.relative_to(world.home)} still holds {', '.join(hits[:4])}")
    if world.storage_url:
        text = world.postgres_text()
        hits = sorted(w for w in words if w in text)
        if hits:
            broken.append(f"erased: PostgreSQL tables still hold {', '.join(hits[:4])}")
    return broken


def isolated(ledger: Ledger, seen: Observation, before: Observation | None, actor: str | None) -> list[str]:
    """A peer sees only its own markers and approved items; no other peer's step changes what it sees or has pending."""
    broken = []
    for peer in seen.views:
        for part, markers in seen.view_markers(peer).items():
            foreign = sorted(m for m in markers if ledger.owner(m) not in (None, peer) and not approved(ledger, m))
            if foreign:
                broken.append(
                    f"isolated: {peer}'s {part} shows {foreign[:3]} of {[ledger.owner(m) for m in foreign[:3]]}"
                )
    if before is None or actor is None:
        return broken
    for peer in seen.views:
        if peer == actor or peer not in before.views:
            continue
        now, then = seen.view_markers(peer)["recall"], before.view_markers(peer)["recall"]
        if now != then:
            broken.append(
                f"isolated: {actor}'s step changed {peer}'s recall: -{sorted(then - now)} +{sorted(now - then)}"
            )
        if seen.failed or before.failed:
            broken.append(f"isolated: the approval queue could not be read: {(seen.failed or before.failed)[:2]}")
            break
        pending_now, pending_then = pending_of(ledger, seen, peer), pending_of(ledger, before, peer)
        # new items the model proposed during this step are the peer's own session's reflection, run late
        changed = (pending_then - pending_now) | {m for m in pending_now - pending_then if not proposed_now(ledger, m)}
        if changed:
            gone, came = sorted(changed & pending_then), sorted(changed & pending_now)
            broken.append(f"isolated: {actor}'s step changed {peer}'s pending approvals: gone {gone}, new {came}")
    return broken


def approved(ledger: Ledger, marker: str) -> bool:
    """Whether a person approved the item this marker names (it then applies to everyone)."""
    item = ledger.items.get(marker)
    return item is not None and item.approved


def proposed_now(ledger: Ledger, marker: str) -> bool:
    """Whether the model proposed this item during the step just taken."""
    item = ledger.items.get(marker)
    return item is not None and item.step == ledger.step


def pending_of(ledger: Ledger, seen: Observation, peer: str) -> set[str]:
    """The markers of a peer's items waiting for approval (those a person decided since are left out)."""
    text = " ".join(f"{a.get('title', '')} {a.get('body', '')}" for a in seen.approvals)
    decided = {marker for marker, item in ledger.items.items() if item.decided}
    return {m for m in MARKER.findall(text) if ledger.owner(m) == peer and m not in decided}


def approved_stay(world: World, ledger: Ledger) -> list[str]:
    """An approved item stays (in some file of the home) until a person removes it."""
    approved = [item for item in ledger.items.values() if item.approved]
    if not approved:
        return []
    data = b"".join(p.read_bytes() for p in world.home_files() if ".git" not in p.parts and p.name != "filler")
    return [f"approved: {item.marker} ({item.peer}) is gone" for item in approved if item.marker.encode() not in data]


def sound(world: World) -> list[str]:
    """Every SQLite database of the home passes `PRAGMA integrity_check`."""
    broken = []
    for path in world.databases():
        try:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
            try:
                result = [row[0] for row in db.execute("PRAGMA integrity_check").fetchall()]
            finally:
                db.close()
        except sqlite3.Error as exc:
            result = [str(exc)]
        if result != ["ok"]:
            broken.append(f"integrity: {path.relative_to(world.home)}: {result[:2]}")
    return broken


def one_session(seen: Observation) -> list[str]:
    """At most one open session per thread (and agent)."""
    keys: Counter[tuple[Any, ...]] = Counter()
    for record in seen.sections.get("working", []):
        session = record.get("session", {})
        if session.get("closed") is None:
            keys[(session.get("workspace"), session.get("peer"), session.get("thread"), session.get("agent"))] += 1
    return [f"one session: {key} has {count} open sessions" for key, count in keys.items() if count > 1]
