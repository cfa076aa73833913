"""Secret redaction for text headed into persona files, the audit log and other layers.

Each pattern matches a whole token (its character class runs to the token's end and the
token may not continue an identifier on either side), so a key is never left half-visible.
Patterns demand a vendor prefix plus a realistic length, or an explicit `key = value`
shape, so ordinary words and sentences pass through unchanged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_B = r"(?<![A-Za-z0-9_\-])"  # token start: not inside another token
_E = r"(?![A-Za-z0-9_\-])"  # token end


@dataclass(frozen=True)
class SecretPattern:
    """One kind of secret: its label and the expression matching it (group `secret`)."""

    kind: str
    regex: re.Pattern[str]


def _p(kind: str, pattern: str, flags: int = 0) -> SecretPattern:
    return SecretPattern(kind, re.compile(pattern, flags))


PATTERNS: tuple[SecretPattern, ...] = (
    _p(
        "private-key",
        r"(?P<secret>-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----(?:[\s\S]*?-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|[\s\S]*))",
    ),
    _p("anthropic-key", _B + r"(?P<secret>sk-ant-[A-Za-z0-9_\-]{16,})" + _E),
    _p("openai-key", _B + r"(?P<secret>sk-(?!ant-)(?:proj-|svcacct-)?[A-Za-z0-9_\-]{32,})" + _E),
    _p("slack-token", _B + r"(?P<secret>(?:xox[abposre]|xapp)(?:\.xox[a-z])?-[A-Za-z0-9\-]{10,})" + _E),
    _p("slack-webhook", r"(?P<secret>https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+)"),
    _p("github-token", _B + r"(?P<secret>(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}))" + _E),
    _p("aws-access-key", _B + r"(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[A-Z0-9]{16})" + _E),
    _p("google-api-key", _B + r"(?P<secret>AIza[A-Za-z0-9_\-]{35})" + _E),
    _p("stripe-key", _B + r"(?P<secret>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,})" + _E),
    _p("jwt", _B + r"(?P<secret>eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,})" + _E),
    _p("url-password", r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]*:)(?P<secret>[^\s@/]+)(?=@)"),
    _p("bearer-token", r"(?P<lead>\b[Bb]earer\s+)(?P<secret>[A-Za-z0-9_\-.~+/]{20,}=*)"),
    _p(
        "assigned-secret",
        r"(?P<lead>\b(?:aws_secret_access_key|secret_access_key|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret"
        r"|secret[_-]?key|password|passwd)\b[\"']?\s*[:=]\s*[\"']?)(?P<secret>[^\s\"',;]{6,})",
        re.IGNORECASE,
    ),
)


def redact(text: str) -> str:
    """The text with every secret replaced by `[REDACTED:<kind>]`."""
    for pattern in PATTERNS:
        text = pattern.regex.sub(lambda m, kind=pattern.kind: _replace(m, kind), text)
    return text


def find_secrets(text: str) -> list[str]:
    """The kinds of secret found in a text (one entry per occurrence)."""
    found: list[str] = []
    for pattern in PATTERNS:
        found += [pattern.kind for m in pattern.regex.finditer(text) if not m.group("secret").startswith("[REDACTED")]
    return found


def _replace(match: re.Match[str], kind: str) -> str:
    secret = match.group("secret")
    if secret.startswith("[REDACTED"):
        return match.group(0)
    start, end = match.span("secret")
    whole = match.group(0)
    offset = match.start()
    return whole[: start - offset] + f"[REDACTED:{kind}]" + whole[end - offset :]


def redact_tree(value: object) -> object:
    """Redact every string inside nested lists and dicts (keys included)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    if isinstance(value, dict):
        return {redact(str(k)) if isinstance(k, str) else k: redact_tree(v) for k, v in value.items()}
    return value
