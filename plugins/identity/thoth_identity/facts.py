"""Reading `/remember` text as hard facts (subject, predicate, value) or, failing that, a free note.

The rules read a sentence whole (case-insensitive, a trailing period dropped, `I'm`, `I've`,
`don't` and `name's` read as their long forms): a sentence no rule reads to its end stays a note,
so nothing said is lost. About the speaker:
- `my name is X`, `call me X`, `I am called X`                        -> name
- `I work at/for X` (`... as a Y`), `I am working at X`, `I am employed by X` -> employer (profession)
- `I work as X`, `I am a/an X` (`... at Y`), `I am a X by profession`  -> profession (employer)
- `I live in X`, `I am based in X`, `I moved to X`                     -> location
- `I was born in X`                                                    -> birthplace, birth_year for a year
- `I am from X` -> origin; `I speak X` -> language
- `I prefer X` -> preference; `I like/love/enjoy X` -> likes; `I dislike/hate/do not like X` -> dislikes
- `my KEY is X` (e.g. `my employer is Acme`) -> KEY; `KEY: VALUE` (KEY of 1-3 words, no URL) -> KEY
About people and things the speaker names (NAME capitalised, 1-3 words):
- `my RELATION NAME lives in X` (or works at/for/as, moved to, was born in, is from, is a X, likes X)
  -> RELATION = NAME (an entity link) and NAME's fact; `my RELATION NAME` -> RELATION = NAME
- `my RELATION is called NAME`, `my RELATION's name is NAME`           -> RELATION = NAME
- `NAME lives in X` (the same verbs but `is a`)                        -> NAME's fact
- `NAME's KEY is X` (e.g. `Maria's city is Berlin`)                    -> NAME's KEY
Values of the plain-word forms must look like one: at most six words, no clause (a comma, `every`,
`because`, `and I`), not a pronoun or a vague word, so `I work at it every day`, `I work at home`
and `I am a bit tired` stay notes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

# Relations a person has one of at a time; the other relations below may hold several people at once.
ONE_AT_A_TIME: tuple[str, ...] = ("mother", "mom", "mum", "father", "dad", "wife", "husband", "partner", "spouse")
ONE_AT_A_TIME += ("boyfriend", "girlfriend", "fiance", "fiancee", "boss", "manager", "therapist", "mentor")
MANY_AT_A_TIME: tuple[str, ...] = ("sister", "brother", "son", "daughter", "child", "kid", "friend", "best friend")
MANY_AT_A_TIME += ("cousin", "aunt", "uncle", "niece", "nephew", "grandmother", "grandfather", "grandma", "grandpa")
MANY_AT_A_TIME += ("grandson", "granddaughter", "colleague", "coworker", "co-worker", "roommate", "flatmate")
MANY_AT_A_TIME += ("neighbour", "neighbor", "dog", "cat", "teacher", "doctor")
# Predicates that may hold several values at once; every other predicate has one current value.
MULTI_VALUED = frozenset(
    {"preference", "likes", "dislikes", "language", *(r.replace(" ", "_").replace("-", "_") for r in MANY_AT_A_TIME)}
)
# Other names of a predicate, as a model or a `my KEY is X` may word it, mapped to the one the rules use.
CANONICAL = {
    **dict.fromkeys(("works_at", "work_at", "works_for", "work_for", "workplace", "employed_by"), "employer"),
    "company": "employer",
    **dict.fromkeys(("job", "occupation", "job_title", "works_as", "work_as"), "profession"),
    **dict.fromkeys(("lives_in", "live_in", "residence", "resides_in", "current_city", "home_city"), "location"),
    **dict.fromkeys(("born_in", "place_of_birth", "birth_place"), "birthplace"),
    **dict.fromkeys(("year_of_birth", "born_year"), "birth_year"),
    **dict.fromkeys(("is_from", "comes_from", "hometown_country"), "origin"),
    "speaks": "language",
    "like": "likes",
    "dislike": "dislikes",
    "prefers": "preference",
}


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


def canonical_predicate(key: str) -> str:
    """A predicate name in the words the rules use (`works_at` -> `employer`)."""
    name = normalize_predicate(key)
    return CANONICAL.get(name, name)


# --- what a value must look like --------------------------------------------------------------

_CLAUSE = re.compile(
    r"[,;:!?()\[\]{}<>\"]|\b(?:every|each|because|since|until|when|whenever|while|which|who|where|if|but|though"
    r"|although|unless|with)\b|\band\s+(?:i|my|we|he|she|they|it|then)\b",
    re.I,
)
_VAGUE = frozenset(
    "a an to it its this that these those them him her me myself yourself you your my our his their there here home"
    " night nights times all least once first last some something nothing everything anything lot lots being doing"
    " how what why weekends weekend midnight noon heart".split()
)
_VAGUE_THE = frozenset("moment weekend weekends same time end start office house desk computer".split())
_QUALIFIERS = frozenset("bit little lot fan big huge great good bad real total complete such very kind sort".split())
_QUALIFIERS |= frozenset("pretty fairly quite few couple tad member part".split())
_NOT_ROLES = frozenset("vegetarian vegan pescatarian person people human man woman guy girl boy kid child".split())
_NOT_ROLES |= frozenset("parent mother father mom mum dad fan beginner newbie owl lark bot robot idiot fool".split())
_ROLE = re.compile(r"^[^\W\d_]+(?:[\s\-][^\W\d_]+){0,3}$")
_YEAR = re.compile(r"^(?:1[89]|20)\d\d$")
_NOT_NAMES = frozenset("i he she it we they you this that there here everyone everybody nobody someone".split())
_NOT_NAMES |= frozenset("somebody my our your his her their the a an no one none all each some".split())


def plain_value(value: str) -> str | None:
    """A place, employer or thing as said (1-6 words, no clause, not vague), else None."""
    value = value.strip().strip("\"'")
    words = value.split()
    if not 1 <= len(words) <= 6 or _CLAUSE.search(value):
        return None
    first = words[0].lower()
    if first in _VAGUE or (first == "the" and len(words) > 1 and words[1].lower() in _VAGUE_THE):
        return None
    return value


def role_value(value: str) -> str | None:
    """A role or profession (1-4 words of letters, not `a bit tired`, `vegetarian`), else None."""
    value = value.strip()
    if not _ROLE.match(value):
        return None
    words = value.lower().replace("-", " ").split()
    if words[0] in _QUALIFIERS or words[0] in _VAGUE or any(w in _NOT_ROLES or w.endswith("person") for w in words):
        return None
    return value


def _name(value: str) -> str | None:
    """An entity's name (capitalised words, not a pronoun), else None."""
    return None if value.split()[0].lower() in _NOT_NAMES else value


# --- the forms (read on the text with its spaces collapsed, so a space in a pattern is one space) --------

_ADVERB = "(?:(?:now|currently|still|also|actually|just|recently) )?"
_NAME = r"(?-i:[A-Z][\w'\-]*(?: [A-Z][\w'\-]*){0,2})"
_RELATION = "|".join(re.escape(r) for r in sorted(ONE_AT_A_TIME + MANY_AT_A_TIME, key=len, reverse=True))
_KIN = r"(?:(?:older|younger|little|big|elder|baby|twin|step)[ \-]?)?"
_NAMED_RELATION = re.compile(rf"^{_KIN}(?:{_RELATION}) (?-i:[A-Z])", re.I)
_AS_ROLE = "(?: as (?:an? )?(?P<role>.+?))?"
_AT_ORG = "(?: (?:at|for) (?P<org>.+?))?"


@dataclass(frozen=True)
class Verb:
    """A verb of the plain-word forms: `I {first} X` and `NAME {third} X` state `predicate` = X."""

    first: str
    third: str
    predicate: str
    tail: str = ""  # what may follow the value: `as a ROLE`, `at ORG`
    bare: bool = True  # False: `NAME {third} X` only after `my RELATION` (`my brother Tom is a pilot`)


_WORK_AT = "(?:work (?:at|for)|am working (?:at|for)|am employed (?:at|by))"
_WORKS_AT = "(?:works (?:at|for)|is working (?:at|for)|is employed (?:at|by))"
_VERBS = [
    Verb(
        "(?:live (?:in|at)|am (?:living|based) in|reside in)",
        "(?:lives (?:in|at)|is (?:living|based) in)",
        "location",
    ),
    Verb(f"(?:have )?{_ADVERB}moved to", f"(?:has )?{_ADVERB}moved to", "location"),
    Verb(_WORK_AT, _WORKS_AT, "employer", _AS_ROLE),
    Verb("work as(?: an?)?", "works as(?: an?)?", "profession", _AT_ORG),
    Verb("am an?", "is an?", "profession", _AT_ORG, bare=False),
    Verb("was born in", "was born in", "birthplace"),
    Verb("(?:am|come) from", "(?:is|comes) from", "origin"),
    Verb("(?:like|love|enjoy)", "(?:likes|loves|enjoys)", "likes"),
    Verb("(?:dislike|hate|do not like)", "(?:dislikes|hates|does not like)", "dislikes"),
    Verb("speak", "speaks", "language"),
]


def _birth(value: str, subject: str | None) -> list[ParsedFact]:
    """`born in 1990`, `born in Oslo` or `born in Oslo in 1990`."""
    if _YEAR.match(value):
        return [ParsedFact("birth_year", value, subject)]
    place, _, year = value.rpartition(" in ")
    if place and _YEAR.match(year):
        where = plain_value(place)
        return [ParsedFact("birthplace", where, subject), ParsedFact("birth_year", year, subject)] if where else []
    where = plain_value(value)
    return [ParsedFact("birthplace", where, subject)] if where else []


def _facts_of(predicate: str, said: dict[str, str | None], subject: str | None) -> list[ParsedFact]:
    """The facts one verb's value states (and the role or employer after it), or [] when one is not a value."""
    value = str(said["value"])
    if predicate == "birthplace":
        return _birth(value, subject)
    found = (role_value if predicate == "profession" else plain_value)(value)
    if found is None:
        return []
    facts = [ParsedFact(predicate, found, subject)]
    for group, check, name in (("role", role_value, "profession"), ("org", plain_value, "employer")):
        if said.get(group) is not None:
            if (checked := check(str(said[group]))) is None:
                return []
            facts.append(ParsedFact(name, checked, subject))
    return facts


Reader = Callable[[dict[str, str | None]], list[ParsedFact]]


def _about_me(predicate: str) -> Reader:
    """`I work at Acme`: facts about the speaker."""
    return lambda said: _facts_of(predicate, said, None)


def _about(predicate: str) -> Reader:
    """`Ann lives in Oslo`, `my sister Ann lives in Oslo`: a fact about Ann (and the link sister = Ann)."""

    def read(said: dict[str, str | None]) -> list[ParsedFact]:
        subject = _name(str(said["subject"]))
        facts = _facts_of(predicate, said, subject) if subject else []
        if facts and said.get("relation"):
            return [ParsedFact(normalize_predicate(str(said["relation"])), str(subject)), *facts]
        return facts

    return read


def _link(said: dict[str, str | None]) -> list[ParsedFact]:
    """`my sister Ann`, `my sister is called Ann`: the link sister = Ann."""
    subject = _name(str(said["subject"]))
    return [ParsedFact(normalize_predicate(str(said["relation"])), subject)] if subject else []


def _one(predicate: str | None, *, about_subject: bool = False) -> Reader:
    """The simple forms: one fact, the predicate fixed or the form's KEY (not `my sister Ann is ...`)."""

    def read(said: dict[str, str | None]) -> list[ParsedFact]:
        key = str(said.get("key") or "")
        if predicate is None and _NAMED_RELATION.match(key):
            return []
        value = str(said["value"]).strip().strip("\"'")
        key = predicate or canonical_predicate(key)
        subject = str(said["subject"]) if about_subject else None
        return [ParsedFact(key, value, subject)] if value and key else []

    return read


_MY_RELATION = rf"^my {_KIN}(?P<relation>{_RELATION})"
_FORMS: list[tuple[str, Reader]] = [
    ("^(?:my name is|call me|i am called) (?P<value>.+)$", _one("name")),
    ("^i am an? (?P<value>.+?) by profession$", _one("profession")),
    (rf"{_MY_RELATION}(?: is called|['’]s name is) (?P<subject>{_NAME})$", _link),
    (rf"{_MY_RELATION} (?P<subject>{_NAME})$", _link),
    *((rf"^i {_ADVERB}{v.first} (?P<value>.+?){v.tail}$", _about_me(v.predicate)) for v in _VERBS),
    *(
        (rf"{_MY_RELATION},? (?P<subject>{_NAME}),? {_ADVERB}{v.third} (?P<value>.+?){v.tail}$", _about(v.predicate))
        for v in _VERBS
    ),
    *(
        (rf"^(?P<subject>{_NAME}) {_ADVERB}{v.third} (?P<value>.+?){v.tail}$", _about(v.predicate))
        for v in _VERBS
        if v.bare
    ),
    # what the plain-word forms above found too vague, read as before they were
    ("^i work as (?:an? )?(?P<value>.+)$", _one("profession")),
    ("^i live in (?P<value>.+)$", _one("location")),
    ("^i prefer (?P<value>.+)$", _one("preference")),
    (r"^my (?P<key>[a-z][\w \-]{0,40}?) (?:is|are) (?P<value>.+)$", _one(None)),
    (
        rf"^(?P<subject>{_NAME})['’]s (?P<key>(?-i:[a-z])[\w \-]{{0,40}}?) (?:is|are) (?P<value>.+)$",
        _one(None, about_subject=True),
    ),
]
_COMPILED = [(re.compile(pattern, re.I), read) for pattern, read in _FORMS]
_KEY_VALUE = re.compile(r"^(?P<key>[a-z][\w\-]{0,20}(?: [\w\-]{1,20}){0,2})\s*:\s*(?P<value>.+)$", re.I)
_URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://|\bwww\.", re.I)
_LONG_FORMS = [
    (re.compile(r"\bi['’]m\b", re.I), "I am"),
    (re.compile(r"\bi['’]ve\b", re.I), "I have"),
    (re.compile(r"\b(do|does)n['’]t\b", re.I), r"\1 not"),
    (re.compile(r"\bname['’]s\b", re.I), "name is"),
]


def plain_text(text: str) -> str:
    """The text as the rules read it: spaces collapsed, a trailing period dropped, `I'm` as `I am`."""
    text = " ".join(text.split()).rstrip(".!")
    for pattern, long in _LONG_FORMS:
        text = pattern.sub(long, text)
    return text


def parse_facts(text: str) -> list[ParsedFact]:
    """The facts a `/remember` text states (about the speaker or entities it names); [] for a free note."""
    cleaned = plain_text(text)
    for pattern, read in _COMPILED:
        match = pattern.match(cleaned)
        if match and (facts := read(match.groupdict())):
            return facts
    match = _KEY_VALUE.match(cleaned)
    if match and not _URL.search(cleaned):
        value = match["value"].strip().strip("\"'")
        key = canonical_predicate(match["key"])
        if value and key:
            return [ParsedFact(key, value)]
    return []


def parse_remember(text: str) -> ParsedFact | None:
    """The first fact a `/remember` text states, or None for a free note."""
    return next(iter(parse_facts(text)), None)
