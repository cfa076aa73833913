"""Personal data `redact` replaces only when the agent home opts in: `[privacy] pii = ["card", "ssn"]`.

Unlike a token, a card number or a social security number is just digits, and ordinary text has
many digit runs (order and tracking numbers, phone numbers, dates). So each rule is opt-in and
validated beyond its shape: a card number must pass the Luhn check and start with a known
issuer's prefix; a US SSN must be written `AAA-GG-SSSS` (or with spaces) with an area, group
and serial the Social Security Administration issues (not area 000, 666 or 900-999, group 00,
serial 0000). Each rule is a `SecretRule` of the same table shape as `secret_rules.RULES`.
"""

from __future__ import annotations

import re

from .secret_rules import SecretRule

__all__ = ["PII_KINDS", "PII_RULES", "luhn_valid"]

# Issuer prefixes: Visa, Mastercard (51-55, 2221-2720), Amex, Discover, JCB, Diners, UnionPay, Maestro.
_ISSUER = re.compile(
    r"4|5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720|3[47]|6011|64[4-9]|65|35|30[0-5]|36|38|62|6[37]"
)


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card(value: str) -> bool:
    digits = value.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and bool(_ISSUER.match(digits)) and luhn_valid(digits)


def _ssn(value: str) -> bool:
    area, group, serial = re.split(r"[ -]", value)
    return area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


_DIGITS = tuple("0123456789")  # keywords: a text without a digit skips both rules
PII_RULES: dict[str, SecretRule] = {
    # 13-19 digits, in groups split by single spaces or dashes (`4111 1111 1111 1111`, `3782-822463-10005`)
    "card": SecretRule(
        "card-number",
        r"(?<![\w\-.,+/])(?P<secret>\d{4}(?P<sep>[ \-]?)\d{2,6}(?:(?P=sep)\d{2,6}){0,3})(?![\w\-/]|[.,]\d)",
        _DIGITS,
        _card,
    ),
    "ssn": SecretRule(
        "ssn",
        r"(?<![\w\-.,+/])(?P<secret>\d{3}(?P<sep>[ \-])\d{2}(?P=sep)\d{4})(?![\w\-/]|[.,]\d)",
        _DIGITS,
        _ssn,
    ),
}
PII_KINDS: tuple[str, ...] = tuple(PII_RULES)
