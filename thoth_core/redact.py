"""Secret redaction for everything Thoth keeps: turns, replies, notes, the queue, the audit log.

The kinds of secret and their expressions live in `secret_rules.RULES`. Every rule runs over
the original text and yields the exact span of a secret (its group `secret`), widened to the
end of the token it starts; overlapping spans from several rules are merged into one, named
by the first rule in the table, and each merged span is replaced by `[REDACTED:<kind>]`.
Nothing outside those spans changes, so ordinary words and sentences pass through untouched,
and a text redacted once is left as it is (`[REDACTED:…]` matches no rule).
"""

from __future__ import annotations

import re

from .secret_rules import KINDS, RULES, SecretRule

__all__ = ["KINDS", "RULES", "SecretRule", "find_secrets", "redact", "redact_tree", "secret_spans"]

_TOKEN_TAIL = re.compile(r"[A-Za-z0-9_\-]*+")
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """The secrets in a text as sorted, non-overlapping `(start, end, kind)` spans."""
    lowered = text.lower()
    found: list[tuple[int, int, int]] = []
    for rank, rule in enumerate(RULES):
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
    return [(start, end, RULES[rank].kind) for start, end, rank in merged]


def redact(text: str) -> str:
    """The text with every secret replaced by `[REDACTED:<kind>]`."""
    spans = secret_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    position = 0
    for start, end, kind in spans:
        parts += [text[position:start], f"[REDACTED:{kind}]"]
        position = end
    parts.append(text[position:])
    return "".join(parts)


def find_secrets(text: str) -> list[str]:
    """The kinds of secret found in a text (one entry per occurrence, in text order)."""
    return [kind for _, _, kind in secret_spans(text)]


def redact_tree(value: object) -> object:
    """Redact every string inside nested lists and dicts (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, dict):
        return {redact(str(k)) if isinstance(k, str) else k: redact_tree(v) for k, v in value.items()}
    return value
