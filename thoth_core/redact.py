"""Secret redaction for everything Thoth keeps: turns, replies, notes, the queue, the audit log.

The kinds of secret and their expressions live in `secret_rules.RULES`. Every rule runs over
the original text and yields the exact span of a secret (its group `secret`), widened to the
end of the token it starts; overlapping spans from several rules are merged into one, named
by the first rule in the table, and each merged span is replaced by `[REDACTED:<kind>]`.
Nothing outside those spans changes, so ordinary words and sentences pass through untouched,
and a text redacted once is left as it is (`[REDACTED:…]` matches no rule).

Personal data (`pii_rules`: card numbers, US SSNs) is redacted only when asked for (`pii`). The
policy of an agent home (`[privacy] pii`) is a `Redactor`, one per runtime (`runtime.redactor`,
or `redactor_of(runtime)` for a caller that may hold a stand-in): the runtime's central
redaction and every plugin's own writer use it, so two runtimes in one process keep their own.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from .pii_rules import PII_KINDS, PII_RULES
from .secret_rules import KINDS, RULES, SecretRule

__all__ = [
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
    return RULES + tuple(PII_RULES[kind] for kind in PII_KINDS if kind in pii)


def secret_spans(text: str, pii: Iterable[str] = ()) -> list[tuple[int, int, str]]:
    """The secrets (and the opted-in `pii` kinds) in a text as sorted, non-overlapping `(start, end, kind)` spans."""
    rules = _rules(frozenset(pii))
    lowered = text.lower()
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
            if rule.check is not None and not rule.check(text[start:end]):
                continue
            if rule.key is not None and not rule.key.search(
                text, max(0, match.start() - rule.key_reach), match.start()
            ):
                position = match.start() + 1  # the value may hold the real `key=` (`X=password=...`)
                continue
            found.append((start, _TOKEN_TAIL.match(text, end).end(), rank))  # type: ignore[union-attr]
    found.sort()
    merged: list[list[int]] = []
    for start, end, rank in found:
        if merged and start < merged[-1][1]:
            last = merged[-1]
            last[1], last[2] = max(last[1], end), min(last[2], rank)
        else:
            merged.append([start, end, rank])
    return [(start, end, rules[rank].kind) for start, end, rank in merged]


def redact(text: str, pii: Iterable[str] = ()) -> str:
    """The text with every secret (and opted-in `pii` kind) replaced by `[REDACTED:<kind>]`."""
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


def settled(text: str) -> str:
    """A text still arriving, less a last word that may be the start of a secret (the redactor needs it whole).

    A short word, or one of letters only, is kept: the person has seen it, and no secret rule matches it.
    """
    match = re.match(r"(.*\s)?(\S*)$", text, re.DOTALL)
    head, word = (match.group(1) or "", match.group(2)) if match else (text, "")
    return text if len(word) < 6 or PLAIN_WORD.fullmatch(word) else head


def find_secrets(text: str, pii: Iterable[str] = ()) -> list[str]:
    """The kinds of secret found in a text (one entry per occurrence, in text order)."""
    return [kind for _, _, kind in secret_spans(text, pii)]


def redact_tree(value: object, pii: Iterable[str] = ()) -> object:
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
    """The privacy policy of one runtime: every secret, plus the personal data kinds it opts into."""

    pii: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _rules(self.pii)  # an unknown kind fails here, not at the first write

    @classmethod
    def from_config(cls, config: Any) -> Redactor:
        """The policy of `[privacy] pii` in a `Config`."""
        return cls(frozenset(config.get("privacy.pii") or ()))

    def compile_soon(self) -> None:
        """Compile the rules on a thread, once per process: while a model answers, not when its turn is kept."""
        _compile_soon(self.pii)

    def redact(self, text: str) -> str:
        """The text with every secret and opted-in personal datum replaced by `[REDACTED:<kind>]`."""
        return redact(text, self.pii)

    def redact_tree(self, value: object) -> object:
        """Redact every string inside nested lists and dicts (keys included)."""
        return redact_tree(value, self.pii)

    def find_secrets(self, text: str) -> list[str]:
        """The kinds of secret and opted-in personal datum in a text, in text order."""
        return find_secrets(text, self.pii)


SECRETS_ONLY = Redactor()


def redactor_of(owner: object) -> Redactor:
    """The policy of a runtime (or of an object with a `runtime`), secrets only for anything else."""
    found = getattr(owner, "redactor", None) or getattr(getattr(owner, "runtime", None), "redactor", None)
    return found if isinstance(found, Redactor) else SECRETS_ONLY


@lru_cache(maxsize=16)
def _compile_soon(pii: frozenset[str]) -> None:
    def compile_all() -> None:
        for rule in _rules(pii):
            _ = rule.regex, rule.key

    threading.Thread(target=compile_all, daemon=True, name="thoth-redact-compile").start()
