"""Reading `/remember` text as a hard fact (predicate, value) or, failing that, a free note.

Forms understood (case-insensitive, a trailing period is dropped):
- `my name is X`, `call me X`            -> name = X
- `I work as X`, `I am a/an X by profession` -> profession = X
- `I live in X`                           -> location = X
- `I prefer X`                            -> preference = X (several may hold at once)
- `my KEY is X` (e.g. `my sister is Maria`) -> KEY = X
- `NAME's KEY is X` (e.g. `Maria's city is Berlin`; NAME capitalised, 1-3 words) -> a fact about NAME
- `KEY: VALUE` (e.g. `timezone: CET`)     -> KEY = VALUE, when KEY is 1-3 words and there is no URL
Anything else is kept as a note about the speaker (an observation, not a fact).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Predicates that may hold several values at once; every other predicate has one current value.
MULTI_VALUED = frozenset({"preference", "likes", "dislikes", "language"})

_KEY_VALUE = re.compile(r"^(?P<key>[a-z][\w\-]{0,20}(?: [\w\-]{1,20}){0,2})\s*:\s*(?P<value>.+)$", re.I)
_ENTITY = re.compile(
    r"^(?P<subject>[A-Z][\w\-]{0,30}(?: [A-Z][\w\-]{0,30}){0,2})['’]s"
    r"\s+(?P<key>[a-z][\w \-]{0,40}?)\s+(?:is|are)\s+(?P<value>.+)$"
)
_FORMS: list[tuple[re.Pattern[str], str | None]] = [
    (re.compile(r"^(?:my name is|call me)\s+(?P<value>.+)$", re.I), "name"),
    (re.compile(r"^i work as\s+(?:an?\s+)?(?P<value>.+)$", re.I), "profession"),
    (re.compile(r"^i(?: am|'m) an?\s+(?P<value>.+?)\s+by profession$", re.I), "profession"),
    (re.compile(r"^i live in\s+(?P<value>.+)$", re.I), "location"),
    (re.compile(r"^i prefer\s+(?P<value>.+)$", re.I), "preference"),
    (re.compile(r"^my\s+(?P<key>[a-z][\w \-]{0,40}?)\s+(?:is|are)\s+(?P<value>.+)$", re.I), None),
    (_ENTITY, None),
    (_KEY_VALUE, None),
]
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://|\bwww\.", re.I)


@dataclass(frozen=True)
class ParsedFact:
    """A fact read from text: about the speaker (`subject` None) or about an entity they name."""

    predicate: str
    value: str
    subject: str | None = None

    @property
    def multi_valued(self) -> bool:
        """True when a new value joins the old ones instead of superseding them."""
        return self.predicate in MULTI_VALUED


def normalize_predicate(key: str) -> str:
    """A predicate name: lower case words joined by underscores."""
    return re.sub(r"[^a-z0-9]+", "_", key.strip().lower()).strip("_")


def parse_remember(text: str) -> ParsedFact | None:
    """The fact a `/remember` text states about the speaker, or None for a free note."""
    cleaned = " ".join(text.strip().split()).rstrip(".!")
    for pattern, predicate in _FORMS:
        match = pattern.match(cleaned)
        if not match or (pattern is _KEY_VALUE and _URL.search(cleaned)):
            continue
        value = match.group("value").strip().strip("\"'")
        key = predicate or normalize_predicate(match.group("key"))
        if value and key:
            return ParsedFact(key, value, match.group("subject") if pattern is _ENTITY else None)
    return None
