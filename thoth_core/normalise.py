"""A text as the redactor matches it, with a map back to the original, for secrets disguised in their characters.

`normalised(text)` undoes what hides a token from the rules without changing its meaning:
NFKC (full-width and styled letters become ASCII), zero-width and other invisible format
characters dropped, Cyrillic and Greek letters that look like Latin ones mapped to those (only
inside a token that also holds ASCII letters or digits, so Russian or Greek prose is left as it
is), a spaced-out token joined (`g h p _ X k 9 …`), a token prefix in another case given its
vendor's case (`GHP_` → `ghp_`, `akia…` → `AKIA…`) and two tokens glued together split
(`…EXAMPLEghp_…`). Each character of the result knows the original character it came from, so a
span found in it is replaced in the original text, and nothing else there changes.

`needs_normalising` says whether a text can hold any of that; most chat messages cannot, and
skip the second pass.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["Normalised", "needs_normalising", "normalised", "regions"]

# Look-alikes of Latin letters (Unicode's confusables for the Cyrillic and Greek letters people paste).
HOMOGLYPHS = str.maketrans(
    "АВЕЅІЈКМНОРСТХУԁаеѕіјорсхуԛԝһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιυνκρχ",
    "ABESIJKMHOPCTXYdaesijopcxyqwhlABEZHIKMNOPTYXoiuvkpx",
)
_LOOKALIKE = frozenset("АВЕЅІЈКМНОРСТХУԁаеѕіјорсхуԛԝһӏΑΒΕΖΗΙΚΜΝΟΡΤΥΧοιυνκρχ")

# Token prefixes people retype in another case, and the case their vendor issues them in. The AWS
# ones make the whole 20-character key upper case (key ids are never lower case).
PREFIXES = (
    "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "sk-ant-", "sk-proj-", "xoxb-", "xoxp-",
    "xoxa-", "xapp-", "hf_", "npm_", "pypi-", "sk_live_", "sk_test_", "rk_live_", "whsec_", "AIza",
    "AKIA", "ASIA", "ABIA", "ACCA",
)  # fmt: skip
_UPPER_TOKENS = ("AKIA", "ASIA", "ABIA", "ACCA")
_CANONICAL = {p.lower(): p for p in PREFIXES}
_LOWER = tuple(_CANONICAL)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")  # keeps every length
_TOKEN_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_AWS_BODY = re.compile(r"[A-Za-z0-9]{16}(?![A-Za-z0-9_\-])")
# 4+ single characters split by single spaces (`g h p _`): a token spelled out.
_SPACED = re.compile(r"(?<!\S)(?:\S ){3,}\S(?!\S)")
_NEXT_TOKEN = re.compile(r" (\S+)")
_BLANK = re.compile(r"\s")
_LAST_BLANK = re.compile(r"\s(?=\S*\Z)")  # with an end position: the last blank before it
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]")
_LOOKALIKE_TOKEN = re.compile(r"(?<!\S)\S*?[" + "".join(sorted(_LOOKALIKE)) + r"]\S*")


@dataclass(frozen=True)
class Normalised:
    """A normalised text and, for each of its characters, the index of the original character it came from."""

    text: str
    origin: list[int] | None  # None: the text is the original, unchanged

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of `text[start:end]` (invisible characters inside it included)."""
        if self.origin is None:
            return start, end
        return self.origin[start], self.origin[end - 1] + 1


def needs_normalising(text: str, lowered: str) -> bool:
    """Whether `normalised` may change the text: non-ASCII, a spaced-out token, an odd-cased or glued prefix."""
    if not text.isascii() or _SPACED.search(text):
        return True
    return _has_odd_prefix(text, lowered)


CONTEXT = 160  # characters around a change that are matched again: a token, and the words that name it


def regions(text: str) -> list[tuple[int, int]]:
    """The parts of a text `normalised` would change, each widened by `CONTEXT` to whitespace, merged."""
    changes = [m.span() for m in _NON_ASCII.finditer(text) if _fold(m.group()) != m.group()]
    if not text.isascii() and _LOOKALIKE.intersection(text):  # look-alikes change only in a token with ASCII
        changes += [m.span() for m in _LOOKALIKE_TOKEN.finditer(text) if _ASCII_ALNUM.search(m.group())]
    changes += [m.span() for m in _SPACED.finditer(text)]
    changes += [span for span in _prefix_spans(text) if _odd(text, *span)]
    near: list[list[int]] = []  # changes within 2 * CONTEXT of each other, merged before widening (fewer bisects)
    for start, end in sorted(changes):
        if near and start - CONTEXT <= near[-1][1] + CONTEXT:
            near[-1][1] = max(near[-1][1], end)
        else:
            near.append([start, end])
    merged: list[tuple[int, int]] = []
    for start, end in near:
        start = _after_last_blank(text, max(0, start - CONTEXT))  # from the word holding that character ...
        after = _BLANK.search(text, min(len(text), end + CONTEXT))  # ... to the first blank from there on
        end = after.start() if after else len(text)
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _after_last_blank(text: str, at: int) -> int:
    """The position after the last blank before `at` (0 when there is none): where the word holding `at` starts."""
    reach = 256
    while True:
        begin = max(0, at - reach)
        found = _LAST_BLANK.search(text, begin, at)
        if found or not begin:
            return found.end() if found else 0
        reach *= 4  # a long token: look further back (each step scans four times more, so linear in all)


def _has_odd_prefix(text: str, lowered: str) -> bool:
    """Whether a known prefix stands in the text in an odd case or glued to a token (stops at the first)."""
    if len(lowered) != len(text):
        lowered = text.translate(_ASCII_LOWER)
    for prefix in _LOWER:  # `str.find`: most texts hold no prefix at all
        at = lowered.find(prefix)
        while at >= 0:
            if _odd(text, at, at + len(prefix)):
                return True
            at = lowered.find(prefix, at + 1)
    return False


def _prefix_spans(text: str) -> list[tuple[int, int]]:
    """Where a known prefix stands in the text, in any case, in text order (`str.find`: faster than a regex scan)."""
    lowered = text.lower()
    if len(lowered) != len(text):  # a letter whose lower case is longer (`İ`): lower ASCII only
        lowered = text.translate(_ASCII_LOWER)
    spans = []
    for prefix in _LOWER:
        at = lowered.find(prefix)
        while at >= 0:
            spans.append((at, at + len(prefix)))
            at = lowered.find(prefix, at + 1)
    spans.sort()  # no prefix starts another: one span per position
    return spans


def _odd(text: str, start: int, end: int) -> bool:
    """A prefix in a case its vendor never issues at a token's start, or in its own case glued to a token."""
    found = text[start:end]
    canonical = _CANONICAL[found.lower()]
    glued = start > 0 and text[start - 1] in _TOKEN_CHAR
    return found == canonical if glued else found != canonical


def normalised(text: str) -> Normalised:
    """The text as the rules should see it, with the map back to the original (see the module docstring).

    Each step runs only when the text holds what it changes, so a text with accents or curly quotes
    costs one scan of its non-ASCII characters and comes back unchanged (`origin` None).
    """
    norm = Normalised(text, None)
    if not text.isascii():
        norm = _unicode(text)
        if _LOOKALIKE.intersection(norm.text):
            norm = Normalised(_lookalikes(norm.text), norm.origin)
    if _SPACED.search(norm.text):
        norm = _join_spaced(norm)
    if _has_odd_prefix(norm.text, norm.text.lower()):
        norm = _prefixes(norm)
    return norm


@lru_cache(maxsize=4096)
def _fold(c: str) -> str:
    """A non-ASCII character as matched: "" for a format character (zero-width, soft hyphen, bidi), else NFKC."""
    return "" if unicodedata.category(c) == "Cf" else unicodedata.normalize("NFKC", c)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def _unicode(text: str) -> Normalised:
    """NFKC per character, format characters dropped; the text itself when neither changes anything."""
    parts: list[str] = []
    origin: list[int] = []
    done = 0  # text[:done] is in parts
    for match in _NON_ASCII.finditer(text):
        i, c = match.start(), match.group()
        folded = _fold(c)
        if folded == c:
            continue
        parts.append(text[done:i])
        origin.extend(range(done, i))
        parts.append(folded)
        origin.extend([i] * len(folded))
        done = i + 1
    if not done:
        return Normalised(text, None)
    parts.append(text[done:])
    origin.extend(range(done, len(text)))
    return Normalised("".join(parts), origin)


def _lookalikes(text: str) -> str:
    """Latin for the look-alike letters of each token that also holds an ASCII letter or digit."""

    def latin(match: re.Match[str]) -> str:
        token = match.group()
        return token.translate(HOMOGLYPHS) if any(c.isascii() and c.isalnum() for c in token) else token

    return _LOOKALIKE_TOKEN.sub(latin, text)  # one character for one: the origin map stays as it is


def _identity(norm: Normalised) -> list[int]:
    return norm.origin if norm.origin is not None else list(range(len(norm.text)))


def _join_spaced(norm: Normalised) -> Normalised:
    """Spaced-out tokens joined; a spelled prefix (`g h p _`) also takes the token after it."""
    text, origin = norm.text, _identity(norm)
    parts: list[str] = []
    mapped: list[int] = []
    done = 0
    for match in _SPACED.finditer(text):
        start, end = match.span()
        if start < done:
            continue
        parts.append(text[done:start])
        mapped.extend(origin[done:start])
        parts.append(match.group()[::2])
        mapped.extend(origin[start:end:2])
        done = end
        spelled = match.group()[::2].lower()
        if _NEXT_TOKEN.match(text, end) and (spelled in _CANONICAL or spelled[-1] in "_-."):
            done = end + 1  # the space before the token it spells the prefix of
    parts.append(text[done:])
    mapped.extend(origin[done:])
    return Normalised("".join(parts), mapped)


def _prefixes(norm: Normalised) -> Normalised:
    """Vendor case for an odd-cased prefix at a token's start; a space before a prefix glued to a token."""
    text, origin = norm.text, _identity(norm)
    parts: list[str] = []
    mapped: list[int] = []
    done = 0
    for start, end in _prefix_spans(text):
        if start < done:
            continue
        found = text[start:end]
        canonical = _CANONICAL[found.lower()]
        glued = start > 0 and text[start - 1] in _TOKEN_CHAR
        if glued and found == canonical:  # `…EXAMPLEghp_…` is two tokens
            parts.append(text[done:start] + " ")
            mapped.extend(origin[done:start])
            mapped.append(origin[start])
            done = start
        elif not glued and found != canonical:
            body = _AWS_BODY.match(text, end) if canonical in _UPPER_TOKENS else None
            stop = body.end() if body else end
            parts.append(text[done:start] + canonical + text[end:stop].upper())
            mapped.extend(origin[done:stop])
            done = stop
    parts.append(text[done:])
    mapped.extend(origin[done:])
    return Normalised("".join(parts), mapped)
