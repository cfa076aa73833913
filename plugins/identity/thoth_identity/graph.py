"""Hard facts as a small graph: subject-predicate-object triples whose subjects are entities.

A peer's facts are rows of the `facts` table under (workspace, peer); their `subject` is the peer
itself or a person or thing the peer mentioned (`Maria`, `Rex`); an object that is the subject of
other facts is an entity too, so `alice -sister-> Maria -lives_in-> Berlin` is two hops. Names
match case-insensitively; the first spelling stored is kept. Everything here works on the rows of
`IdentityStore.current_facts` (a peer holds hundreds of facts, not millions), so a block costs no
extra query.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .facts import MULTI_VALUED
from .render import relevant_facts
from .store import IdentityStore

MAX_SUBJECT = 100  # characters of an entity name
MAX_OBJECT = 1_000  # characters of a value
PREDICATE = re.compile(r"^[a-z0-9]+(?:_[a-z0-9]+)*$")
MAX_PREDICATE = 100  # as the derivation schema allowed before triples (old exports import)
ENTITY_FACTS = 20  # facts about entities the message mentions (one hop) that the block may carry
SELF_NAMES = frozenset(
    {"", "i", "me", "myself", "self", "user", "the user", "person", "the person", "speaker", "the speaker"}
)


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


def check_triple(subject: str, predicate: str, value: str) -> str | None:
    """What is wrong with a triple (one line), or None: sizes, and the predicate as a snake_case slug."""
    if len(subject) > MAX_SUBJECT:
        return f"subject {subject[:40]!r}...: longer than {MAX_SUBJECT} characters"
    if not PREDICATE.match(predicate) or len(predicate) > MAX_PREDICATE:
        return f"predicate {predicate[:40]!r}: expected a snake_case slug of at most {MAX_PREDICATE} characters"
    if not value.strip() or len(value) > MAX_OBJECT:
        return f"object of {predicate}: expected 1-{MAX_OBJECT} characters"
    return None


def peer_names(facts: Iterable[dict[str, Any]], peer: str) -> set[str]:
    """The names that mean the peer itself: its id and its current `name` facts."""
    return {_key(peer)} | {_key(f["object"]) for f in facts if f["subject"] == peer and f["predicate"] == "name"}


def resolve_subject(subject: str | None, peer: str, facts: list[dict[str, Any]]) -> str:
    """The stored subject for a name: the peer for `me`/`user`/its own name, else the spelling already stored."""
    key = _key(subject or "")
    if key in SELF_NAMES or key in peer_names(facts, peer):
        return peer
    for fact in facts:
        for name in (fact["subject"], fact["object"]):
            if _key(name) == key:
                return str(name)
    return " ".join(str(subject).split())


def assert_fact(
    store: IdentityStore,
    workspace: str,
    peer: str,
    *,
    subject: str | None,
    predicate: str,
    value: str,
    confidence: float,
    source: str,
) -> dict[str, Any]:
    """Store a triple (a new value for the same subject and predicate supersedes the old; history kept)."""
    who = resolve_subject(subject, peer, store.current_facts(workspace, peer))
    return store.set_fact(
        workspace,
        peer,
        predicate,
        value,
        confidence=confidence,
        source=source,
        multi_valued=predicate in MULTI_VALUED,
        subject=who,
    )


def entities(facts: Iterable[dict[str, Any]], peer: str) -> dict[str, str]:
    """The entities other than the peer (subjects of some fact), by lower-cased name."""
    return {_key(f["subject"]): f["subject"] for f in facts if f["subject"] != peer}


def mentioned(facts: list[dict[str, Any]], peer: str, text: str) -> list[str]:
    """The entities named in a message (whole words, any case), in the order they appear."""
    lowered = _key(text)
    found = []
    for key, name in entities(facts, peer).items():
        at = re.search(r"(?<!\w)" + re.escape(key) + r"(?!\w)", lowered)
        if at:
            found.append((at.start(), name))
    return [name for _, name in sorted(found)]


def neighbourhood(facts: list[dict[str, Any]], peer: str, name: str, *, with_peer: bool = True) -> dict[str, Any]:
    """An entity's facts, the facts pointing at it, and the facts of the entities one hop away."""
    key = _key(name)
    if key in peer_names(facts, peer):
        key = _key(peer)
    about = [f for f in facts if _key(f["subject"]) == key]
    pointing = [f for f in facts if _key(f["object"]) == key and _key(f["subject"]) != key]
    known = {_key(f["subject"]) for f in facts}
    near = [_key(f["object"]) for f in about if _key(f["object"]) in known] + [_key(f["subject"]) for f in pointing]
    hops: dict[str, list[dict[str, Any]]] = {}
    for other in dict.fromkeys(near):
        if other == key or (not with_peer and other == _key(peer)):
            continue
        hops[other] = [f for f in facts if _key(f["subject"]) == other]
    names = {_key(f["subject"]): f["subject"] for f in facts}
    return {
        "entity": names.get(key, name),
        "facts": about,
        "pointing": pointing,
        "hops": {names.get(k, k): rows for k, rows in hops.items()},
    }


def block_facts(
    facts: list[dict[str, Any]], peer: str, text: str, *, limit: int = ENTITY_FACTS
) -> list[dict[str, Any]]:
    """The facts for a message's block: the peer's (relevant first), then those about entities it mentions, one hop."""
    own = relevant_facts([f for f in facts if f["subject"] == peer], text)
    chosen = {f["id"] for f in own}
    extra: list[dict[str, Any]] = []
    for name in mentioned(facts, peer, text):
        near = neighbourhood(facts, peer, name, with_peer=False)
        for fact in [*near["facts"], *near["pointing"], *(f for rows in near["hops"].values() for f in rows)]:
            if fact["id"] not in chosen:
                chosen.add(fact["id"])
                extra.append(fact)
    return own + extra[:limit]
