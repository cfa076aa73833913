"""Secret and personal data redaction for everything Thoth keeps: turns, replies, notes, the queue, the audit log.

The kinds of secret and their expressions live in `secret_rules.RULES`, the kinds of personal data
in `pii_rules.PII_RULES`. Every rule runs over the text and yields the exact span of a secret (its
group `secret`), widened to the end of the token it starts; overlapping spans from several rules
are merged into one, named by the first rule in the table, and each merged span is replaced by
`[REDACTED:<kind>]`. Nothing outside those spans changes, so ordinary words and sentences pass
through untouched, and a text redacted once is left as it is (`[REDACTED:…]` matches no rule).

Two more passes catch disguised secrets. A text with non-ASCII or invisible characters, a
spaced-out token or an odd-cased or glued token prefix is matched a second time as
`normalise.normalised` gives it (NFKC, zero-width characters dropped, look-alike letters mapped,
prefixes in their vendor's case), and what is found there is replaced in the original text
through its offset map. A run of base64 is decoded, and when the decoded text holds a secret,
the run is replaced with that secret's kind.

Secrets are always redacted; personal data by the kinds of a policy (`pii`, default
`pii_rules.DEFAULT_PII`: every kind). The policy of an agent home (`[privacy] pii`) is a `Redactor`,
one per runtime (`runtime.redactor`, or `redactor_of(runtime)` for a caller that may hold a
stand-in): the runtime's central redaction and every plugin's own writer use it, so two
runtimes in one process keep their own.
"""

from __future__ import annotations

import base64
import binascii
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .normalise import needs_normalising, normalised, regions
from .pii_rules import DEFAULT_PII, PII_KINDS, PII_RULES
from .secret_rules import KINDS, RULES, SecretRule

__all__ = [
    "DEFAULT_PII",
    "KINDS",
    "PII_KINDS",
    "RULES",
    "Redactor",
    "SecretRule",
    "find_secrets",
    "redact",
    "redact_tree",
    "redactor_of",
    "secret_spans",
]

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*+")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


@lru_cache(maxsize=16)
def _rules(pii: frozenset[str]) -> tuple[SecretRule, ...]:
    unknown = sorted(pii - set(PII_KINDS))
    if unknown:
        raise ValueError(f"unknown PII kind {unknown[0]!r}; known: {', '.join(PII_KINDS)}")
    return RULES + tuple(rule for kind in PII_KINDS if kind in pii for rule in PII_RULES[kind])


def secret_spans(text: str, pii: Iterable[str] = DEFAULT_PII) -> list[tuple[int, int, str]]:
    """The secrets and the `pii` kinds of personal data in a text: sorted, non-overlapping `(start, end, kind)`."""
    rules = _rules(frozenset(pii))
    lowered = text.lower()
    found = _matches(text, lowered, rules)
    if needs_normalising(text, lowered):
        for offset, stop in regions(text):
            part = text[offset:stop]
            norm = normalised(part)
            if norm.text != part:
                for start, end, rank in _matches(norm.text, None, rules):
                    start, end = norm.span(start, end)
                    found.append((offset + start, offset + end, rank))
    found += _wrapped(text, found)
    found.sort()
    merged: list[list[int]] = []
    for start, end, rank in found:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1], last[2] = max(last[1], end), min(last[2], rank)
        else:
            merged.append([start, end, rank])
    return [(start, end, rules[rank].kind) for start, end, rank in merged]


def _matches(text: str, lowered: str | None, rules: tuple[SecretRule, ...]) -> list[tuple[int, int, int]]:
    """Every rule's spans in a text, as `(start, end, rank in rules)`, overlapping."""
    lowered = text.lower() if lowered is None else lowered
    found: list[tuple[int, int, int]] = []
    for rank, rule in enumerate(rules):
        if rule.keywords and not any(k in lowered for k in rule.keywords):
            continue
        position = 0
        while match := rule.regex.search(text, position):
            position = match.end()
            start, end = match.span("secret")
            if text[end - 1 : end] == "." and (end == len(text) or text[end].isspace()):
                end -= 1  # a sentence's full stop, not part of the value
            if rule.bounded and match.start() and text[match.start() - 1] in _TOKEN_CHARS:
                # inside another identifier: no token starts before that identifier ends
                position = _TOKEN_TAIL.match(text, match.start()).end()  # type: ignore[union-attr]
                continue
            if text.startswith("[REDACTED", start) or end <= start:
                continue
            if not rule.rescan and not _near_keyword(text, match.start(), rule):
                continue  # no key here (checked before the value: cheaper, and the search goes on after it either way)
            if rule.check is not None and not rule.check(text[start:end]):
                continue
            if rule.key is not None and not _keyed(text, match.start(), rule):
                if rule.rescan:
                    position = match.start() + 1  # the value may hold the real `key=` (`X=password=...`)
                continue
            found.append((start, _TOKEN_TAIL.match(text, end).end(), rank))  # type: ignore[union-attr]
    return found


def _near_keyword(text: str, at: int, rule: SecretRule) -> bool:
    """Whether one of a keyed rule's keywords (every key holds one) is in reach before `at`: a substring test."""
    if rule.key is None or not rule.keywords:
        return True
    window = text[max(0, at - rule.key_reach) : at].lower()
    return any(k in window for k in rule.keywords)


def _keyed(text: str, at: int, rule: SecretRule) -> bool:
    """Whether the text just before `at` ends with the rule's key."""
    if not _near_keyword(text, at, rule):
        return False
    return rule.key.search(text, max(0, at - rule.key_reach), at) is not None  # type: ignore[union-attr]


# 24+ base64 characters (18+ bytes: the shortest token worth wrapping), standard or URL-safe alphabet.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{24,}+={0,2}(?![A-Za-z0-9+/=_\-])")


_LONG_WORD = re.compile(r"\S{8}")  # every secret has 8 characters without a blank: decoded prose skips the rules


def _wrapped(text: str, found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Base64 runs (not already found) whose decoded text holds a secret, named by that secret's rule."""
    if len(text) < 24:
        return []
    wrapped = []
    for match in _BASE64_RUN.finditer(text):
        start, end = match.span()
        if any(s <= start < e for s, e, _ in found):
            continue
        decoded = _decoded(match.group())
        inner = _matches(decoded, None, RULES) if _LONG_WORD.search(decoded) else []
        if inner:
            wrapped.append((start, end, min(inner)[2]))
    return wrapped


def _decoded(run: str) -> str:
    """The printable text a base64 run encodes, or "" when it is not one."""
    if ("-" in run or "_" in run) and ("+" in run or "/" in run):
        return ""
    run = run.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        text = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return ""
    return text if text.isprintable() or text.replace("\n", "").replace("\t", "").isprintable() else ""


def redact(text: str, pii: Iterable[str] = DEFAULT_PII) -> str:
    """The text with every secret and every `pii` kind of personal data replaced by `[REDACTED:<kind>]`."""
    spans = secret_spans(text, pii)
    if not spans:
        return text
    parts: list[str] = []
    position = 0
    for start, end, kind in spans:
        parts += [text[position:start], f"[REDACTED:{kind}]"]
        position = end
    parts.append(text[position:])
    return "".join(parts)


PLAIN_WORD = re.compile(r"[^\W\d_]{1,24}[.,;:!?'\")\]]*")  # letters of any script, then closing punctuation
# A short word that may be one group of a datum written in groups (`4111 1111 …`, `+44 20 7946 …`,
# `DE89 3704 …`, `AB 12 34 …`), or one character of a spaced-out token (`g h p _ …`).
GROUP_WORD = re.compile(r"[+(]?[0-9A-Z]{0,5}[0-9][0-9A-Z]{0,5}[)\-./]?|\S")


def settled(text: str) -> str:
    """A text still arriving, less what may be the start of a secret or personal datum (the redactor needs it whole).

    That is a last word of 6+ characters (unless it is letters only: no rule matches one), and
    before it a run of short groups and single characters (`4111 1111`, `+1 415`, `g h p _`),
    which the next words may complete. A short plain word is kept: the person has seen it.
    """
    match = re.match(r"(.*\s)?(\S*)$", text, re.DOTALL)
    head, word = (match.group(1) or "", match.group(2)) if match else (text, "")
    if len(word) < 6 or PLAIN_WORD.fullmatch(word):
        head, word = text, ""
    if word or (head and (head[-1].isspace() or GROUP_WORD.fullmatch(head.rsplit(None, 1)[-1]))):
        head = _without_groups(head)
    return head


def _without_groups(head: str) -> str:
    """The text less a trailing run of group words (and the blanks between them).

    Single letters count only three or more in a row: a lone `I` or `x` spells no token.
    """
    end, words = len(head), []
    while True:
        stripped = head[:end].rstrip()
        cut = max(stripped.rfind(" "), stripped.rfind("\n"), stripped.rfind("\t")) + 1
        if not stripped or not GROUP_WORD.fullmatch(stripped[cut:]):
            break
        words.append(stripped[cut:])
        end = cut
    spelled = all(len(w) == 1 and not w.isdigit() for w in words)
    return head if spelled and len(words) < 3 else head[:end]


def find_secrets(text: str, pii: Iterable[str] = DEFAULT_PII) -> list[str]:
    """The kinds of secret and `pii` personal data found in a text (one entry per occurrence, in text order)."""
    return [kind for _, _, kind in secret_spans(text, pii)]


def redact_tree(value: object, pii: Iterable[str] = DEFAULT_PII) -> object:
    """Redact every string inside nested lists and dicts (keys included)."""
    pii = frozenset(pii)
    if isinstance(value, str):
        return redact(value, pii)
    if isinstance(value, list):
        return [redact_tree(v, pii) for v in value]
    if isinstance(value, dict):
        return {redact(k, pii) if isinstance(k, str) else k: redact_tree(v, pii) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class Redactor:
    """The privacy policy of one runtime: every secret, plus its kinds of personal data (default: every kind)."""

    pii: frozenset[str] = DEFAULT_PII

    def __post_init__(self) -> None:
        _rules(self.pii)  # an unknown kind fails here, not at the first write

    @classmethod
    def from_config(cls, config: Any) -> Redactor:
        """The policy of `[privacy] pii` in a `Config` (`[]`: secrets only; unset: `DEFAULT_PII`)."""
        kinds = config.get("privacy.pii")
        return cls(DEFAULT_PII if kinds is None else frozenset(kinds))

    def compile_soon(self) -> None:
        """Compile the rules on a thread, once per process: while a model answers, not when its turn is kept."""
        _compile_soon(self.pii)

    def redact(self, text: str) -> str:
        """The text with every secret and personal datum of the policy replaced by `[REDACTED:<kind>]`."""
        return redact(text, self.pii)

    def redact_tree(self, value: object) -> object:
        """Redact every string inside nested lists and dicts (keys included)."""
        return redact_tree(value, self.pii)

    def find_secrets(self, text: str) -> list[str]:
        """The kinds of secret and personal datum of the policy in a text, in text order."""
        return find_secrets(text, self.pii)


DEFAULT_POLICY = Redactor()


def redactor_of(owner: object) -> Redactor:
    """The policy of a runtime (or of an object with a `runtime`), the default policy for anything else."""
    found = getattr(owner, "redactor", None) or getattr(getattr(owner, "runtime", None), "redactor", None)
    return found if isinstance(found, Redactor) else DEFAULT_POLICY


@lru_cache(maxsize=16)
def _compile_soon(pii: frozenset[str]) -> None:
    def compile_all() -> None:
        for rule in _rules(pii):
            _ = rule.regex, rule.key

    threading.Thread(target=compile_all, daemon=True, name="thoth-redact-compile").start()
