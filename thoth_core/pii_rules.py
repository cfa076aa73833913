"""Personal data `redact` replaces, by kind (`[privacy] pii`): email, phone, IBAN, card, US SSN, other national ids.

Unlike a token, most personal data is digits, and ordinary text has many digit runs (years,
prices, order and tracking numbers, dates, versions). So each rule wants a strict shape and,
where the datum has one, its checksum:

- `email`: `local@domain.tld`, not a URL's user (`postgres://app@db`), not scp's `git@host:path`;
- `phone`: `+CC …` with 8-15 digits (E.164), a North American `(415) 555-0132` / `415-555-0132`
  (valid area code and exchange), a national `0…` number in groups with 10-12 digits, or 7-15
  digits right after `phone:`, `tel`, `mobile`, `call me at` and the like;
- `iban`: ISO 13616, compact or in groups of four, with the country's length and format and the
  mod-97 check (python-stdnum's IBAN registry);
- `card`: 13-19 digits, a known issuer's prefix and the Luhn check;
- `ssn`: a US SSN `AAA-GG-SSSS` (or spaced), or nine digits after `SSN`, with an area, group and
  serial the Social Security Administration issues (not area 000, 666 or 900-999, group 00,
  serial 0000);
- `national-id`: ids whose format or check character keeps ordinary text clear of them: a UK
  National Insurance number (its prefix rules), a Spanish DNI or NIE (mod-23 letter), an Italian
  codice fiscale (check letter), a French NIR (mod-97 key), checked by python-stdnum.

`DEFAULT_PII` is every kind: a personal agent never needs one of them verbatim in its memory (the
model still sees the turn as typed), and what it keeps is sent to the model again in later
prompts. Each rule is a `SecretRule` of the same table shape as `secret_rules.RULES`.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable

from .secret_rules import SecretRule

__all__ = ["DEFAULT_PII", "PII_KINDS", "PII_RULES", "luhn_valid"]

# Issuer prefixes: Visa, Mastercard (51-55, 2221-2720), Amex, Discover, JCB, Diners, UnionPay, Maestro.
_ISSUER = re.compile(
    r"4|5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720|3[47]|6011|64[4-9]|65|35|30[0-5]|36|38|62|6[37]"
)
_NUMBER_AFTER = r"[\w\-.,+/=]"  # what a number never starts right after: a word, a decimal, a path, another number
_NOT_BEFORE = r"(?![\w\-/]|[.,]\d)"  # a number's end
_TOKEN_AFTER = r"[A-Za-z0-9_\-]"


def _first(char: str, not_after: str = _NUMBER_AFTER) -> str:
    """One character (a class) that does not follow `not_after`.

    The lookbehind comes after the character, not before it: an expression that starts with a
    lookbehind is tried at every position, one that starts with a class skips in C to each
    character of that class (twice as fast on prose, and every turn is redacted).
    """
    return f"{char}(?<!{not_after}{char})"


def luhn_valid(digits: str) -> bool:
    """Whether a digit string passes the Luhn checksum."""
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def _card(value: str) -> bool:
    digits = value.replace(" ", "").replace("-", "")
    return 13 <= len(digits) <= 19 and bool(_ISSUER.match(digits)) and luhn_valid(digits)


def _ssn(value: str) -> bool:
    digits = _digits(value)
    area, group, serial = digits[:3], digits[3:5], digits[5:]
    return len(digits) == 9 and area not in ("000", "666") and area[0] != "9" and group != "00" and serial != "0000"


def _international_phone(value: str) -> bool:
    return 8 <= len(_digits(value)) <= 15


def _nanp_phone(value: str) -> bool:
    digits = _digits(value)  # area code [2-9][0-8]X, exchange [2-9]XX
    return digits[0] in "23456789" and digits[1] != "9" and digits[3] in "23456789"


def _national_phone(value: str) -> bool:
    return 10 <= len(_digits(value)) <= 12


def _keyed_phone(value: str) -> bool:
    return 7 <= len(_digits(value)) <= 15


def _iban(value: str) -> bool:
    from stdnum import iban  # imported on the first candidate: most texts have none

    # The registry's length and format and the mod-97 check; not a country's own account check digits
    # (Spain's, France's RIB key): a mistyped account number is still someone's bank details.
    return bool(iban.is_valid(value, check_country=False))


def _stdnum(module: str) -> Callable[[str], bool]:
    """The `is_valid` of a python-stdnum module, imported on the first candidate."""

    def check(value: str) -> bool:
        return bool(importlib.import_module(f"stdnum.{module}").is_valid(value))

    return check


_DIGIT = tuple("0123456789")  # keywords: a text without a digit skips every rule but email's
_PHONE_WORDS = ("phone", "tel", "mobile", "cell", "whatsapp", "sms", "fax", "call", "reach", "text", "number")

PII_RULES: dict[str, tuple[SecretRule, ...]] = {
    # 13-19 digits, in groups split by single spaces or dashes (`4111 1111 1111 1111`, `3782-822463-10005`)
    "card": (
        SecretRule(
            "card-number",
            r"(?P<secret>" + _first(r"\d") + r"\d{3}(?P<sep>[ \-]?)\d{2,6}(?:(?P=sep)\d{2,6}){0,3})" + _NOT_BEFORE,
            _DIGIT,
            _card,
        ),
    ),
    "email": (
        SecretRule(
            "email",
            r"(?<![\w.+\-/:%@])(?P<secret>[A-Za-z0-9][A-Za-z0-9._%+\-]{0,63}+@[A-Za-z0-9][A-Za-z0-9\-]{0,62}+"
            r"(?:\.[A-Za-z0-9\-]{1,63}+)*\.[A-Za-z]{2,24})(?![\w\-@]|\.[\w\-]|:[\w/~])",
            ("@",),
        ),
    ),
    "iban": (
        SecretRule(
            "iban",
            r"(?P<secret>"
            + _first("[A-Z]", _TOKEN_AFTER)
            + r"[A-Z]\d{2}(?:[ \-]?[A-Z0-9]{4}){2,7}+(?:[ \-]?[A-Z0-9]{1,3})?)(?![A-Za-z0-9_\-])",
            _DIGIT,
            _iban,
        ),
    ),
    "national-id": (
        SecretRule(  # UK National Insurance number: prefix letters (D F I Q U V never, O not second), 6 digits, A-D
            "national-id",
            r"(?P<secret>" + _first("[A-CEGHJ-PR-TW-Z]", _TOKEN_AFTER) + r"[A-CEGHJ-NPR-TW-Z](?<!BG|GB|KN|NK|NT|TN|ZZ)"
            r"(?: ?\d{2}){3} ?[A-D])(?![A-Za-z0-9_\-])",
            _DIGIT,
        ),
        SecretRule(  # Spanish DNI (8 digits and its mod-23 letter) and NIE (X/Y/Z, 7 digits, letter)
            "national-id",
            r"(?P<secret>" + _first(r"\d", _TOKEN_AFTER) + r"\d{7}-?[A-Z])(?![A-Za-z0-9_\-])",
            _DIGIT,
            _stdnum("es.dni"),
        ),
        SecretRule(
            "national-id",
            r"(?P<secret>" + _first("[XYZ]", _TOKEN_AFTER) + r"-?\d{7}-?[A-Z])(?![A-Za-z0-9_\-])",
            _DIGIT,
            _stdnum("es.nie"),
        ),
        SecretRule(  # Italian codice fiscale (16 characters in a fixed pattern, a check letter)
            "national-id",
            r"(?P<secret>"
            + _first("[A-Z]", _TOKEN_AFTER)
            + r"[A-Z]{5}\d{2}[A-EHLMPR-T]\d{2}[A-Z]\d{3}[A-Z])(?![A-Za-z0-9_\-])",
            _DIGIT,
            _stdnum("it.codicefiscale"),
        ),
        SecretRule(  # French NIR: sex, year, month, department, commune, order, then the mod-97 key
            "national-id",
            r"(?P<secret>"
            + _first("[12]")
            + r" ?\d{2} ?(?:0[1-9]|1[0-2]|[2-9]\d) ?(?:\d{2}|2[AB]) ?\d{3} ?\d{3} ?\d{2})"
            + _NOT_BEFORE,
            _DIGIT,
            _stdnum("fr.nir"),
        ),
    ),
    "phone": (
        SecretRule(
            "phone",
            r"(?P<secret>"
            + _first(r"\+", r"[\w+/=.\-]")
            + r"[1-9]\d{0,2}(?:[ .\-]?+(?:\(\d{1,4}\)|\d{1,5}+)){2,6}+)"
            + _NOT_BEFORE,
            ("+",),
            _international_phone,
        ),
        SecretRule(
            "phone",
            r"(?P<secret>" + _first(r"[(\d]", r"[\w+/=.\-$#]") + r"(?:(?<=\()\d{3}\)[ .\-]?|(?<!\()\d{2}[ .\-])"
            r"\d{3}[ .\-]\d{4})" + _NOT_BEFORE,
            _DIGIT,
            _nanp_phone,
        ),
        SecretRule(
            "phone",
            r"(?P<secret>" + _first("0", r"[\w\-.,+/=$#]") + r"\d{1,4}(?:[ \-/]\d{2,8}+){1,4}+)" + _NOT_BEFORE,
            _DIGIT,
            _national_phone,
        ),
        SecretRule(
            "phone",
            r"(?P<secret>" + _first(r"[+\d]") + r"(?:(?<=\+)\d|(?<!\+))(?:[ .\-]?+\d){6,14}+)" + _NOT_BEFORE,
            _PHONE_WORDS,
            _keyed_phone,
            r"(?i:\b(?:phone|telephone|tel|mobile|cell|whatsapp|sms|fax|call me|reach me|text me"
            r"|(?:phone|mobile|cell|home|work|my)[ \-]?(?:number|no))\b)[\s:.#]{0,3}(?:(?:at|on|is)\s{1,3})?\Z",
            40,
            rescan=False,  # the key ends in a blank or `:.#`, never in a digit or `+`: none inside the match
        ),
    ),
    "ssn": (
        SecretRule(
            "ssn",
            r"(?P<secret>" + _first(r"\d") + r"\d{2}(?P<sep>[ \-])\d{2}(?P=sep)\d{4})" + _NOT_BEFORE,
            _DIGIT,
            _ssn,
        ),
        SecretRule(
            "ssn",
            r"(?P<secret>" + _first(r"\d") + r"\d{8})" + _NOT_BEFORE,
            ("ssn", "social security"),
            _ssn,
            r"(?i:\b(?:ssn|social security(?: number| no\.?)?))[\s:#]{0,3}(?:is\s{1,3})?\Z",
            32,
            rescan=False,
        ),
    ),
}
PII_KINDS: tuple[str, ...] = tuple(PII_RULES)
DEFAULT_PII: frozenset[str] = frozenset(PII_KINDS)
