"""`[privacy] pii`: personal data (email, phone, IBAN, card, SSN, national ids) is redacted by every writer.

The default is every kind; a home that sets `[privacy] pii = []` keeps personal data as typed
(secrets are redacted whatever the policy). Each runtime carries its own policy
(`runtime.redactor`); two runtimes in one process, one on the default and one opted out, keep
their own.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from thoth_core import ConfigError
from thoth_core.config import load_config
from thoth_core.pii_rules import PII_KINDS, luhn_valid
from thoth_core.redact import Redactor, find_secrets, redact, redactor_of
from thoth_core.testing import make_test_runtime
from thoth_core.testing.secret_corpus import luhn_check_digit, near_miss_corpus

working = pytest.importorskip("thoth_working.plugin")
identity = pytest.importorskip("thoth_identity.plugin")

CARD_SSN = ("card", "ssn")
KNOWN = "card, email, iban, national-id, phone, ssn"
VISA = "4539 1488 0343 6467"
AMEX = "3714-496353-98431"
SSN = "219-09-9999"


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        (f"card {VISA} exp 09/28", VISA, "card-number"),
        ("card 5555-5555-5555-4444.", "5555-5555-5555-4444", "card-number"),
        (f"amex {AMEX}", AMEX, "card-number"),
        ("pay with 4111111111111111 today", "4111111111111111", "card-number"),
        (f"my SSN is {SSN}", SSN, "ssn"),
        ("ssn: 123 45 6789", "123 45 6789", "ssn"),
        ("mail ann.lee@example.com today", "ann.lee@example.com", "email"),
        ("call +1 415-555-0132 after six", "+1 415-555-0132", "phone"),
        ("the office is 020 7946 0958.", "020 7946 0958", "phone"),
        ("IBAN DE89 3704 0044 0532 0130 00 please", "DE89 3704 0044 0532 0130 00", "iban"),
        ("refund to GB82WEST12345698765432, thanks", "GB82WEST12345698765432", "iban"),
        ("IBAN ES2256809657289411733522 (its CCC digits are off)", "ES2256809657289411733522", "iban"),
        ("NI number AB 12 34 56 C", "AB 12 34 56 C", "national-id"),
        ("mi DNI es 12345678Z hoy", "12345678Z", "national-id"),
    ],
)
def test_personal_data_is_replaced_by_its_kind_by_default(text, value, kind):
    assert redact(text) == text.replace(value, f"[REDACTED:{kind}]")
    assert find_secrets(text) == [kind]
    assert redact(text, ()) == text, "a home with [privacy] pii = [] keeps personal data as typed"
    own = kind.removesuffix("-number")  # the policy's name of the kind (`card` for `card-number`)
    assert redact(text, {own}) != text and redact(text, set(PII_KINDS) - {own}) == text, "each kind is its own switch"


@pytest.mark.parametrize(
    "text",
    [
        "tracking 4539 1488 0343 6468",  # fails the Luhn check
        "order 1234567890123452",  # Luhn-valid, but no card issuer starts with 1
        "4539 1488 0343 646",  # 15 digits of a Visa number
        "call +1 415-555-0132",
        "form 000-12-3456",
        "form 666-12-3456",
        "form 912-12-3456",
        "form 123-00-4567",
        "form 123-45-0000",
        "form 123-45-67890",
        "the date 2024-03-15 and version 12.345.6789",
        "amounts 1,234,567.89 and 4539.1488.0343.6467",
    ],
)
def test_digits_that_are_not_a_card_or_an_ssn_are_kept(text):
    assert redact(text, CARD_SSN) == text


def test_the_near_miss_corpus_is_kept_with_every_pii_kind_on():
    assert [c.text for c in near_miss_corpus() if redact(c.text) != c.text] == []


def test_luhn():
    assert luhn_valid("4539148803436467") and not luhn_valid("4539148803436468")
    assert all(luhn_valid(p + str(luhn_check_digit(p))) for p in ("453914880343646", "37144963539843", "7992739871"))


def test_an_unknown_pii_kind_is_refused_by_the_policy():
    with pytest.raises(ValueError, match=f"unknown PII kind 'passport'; known: {KNOWN}$"):
        Redactor(frozenset({"passport", "email"}))
    assert PII_KINDS == tuple(KNOWN.split(", "))


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        (
            '[privacy]\npii = ["card", "passport"]\n',
            f"thoth.toml:2: privacy.pii: unknown kind 'passport'; known: {KNOWN}",
        ),
        ('[privacy]\npii = "card"\n', "thoth.toml:2: privacy.pii: expected a list of personal data kinds"),
        ("[privacy]\npi = []\n", "thoth.toml:2: privacy.pi: unknown key in [privacy]; did you mean 'pii'?"),
        ('privacy = "on"\n', "thoth.toml:1: privacy: expected a table"),
    ],
)
def test_a_bad_privacy_section_is_one_line_naming_the_key(tmp_path, toml, expected):
    path = tmp_path / "thoth.toml"
    path.write_text(toml, encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    message = str(error.value).replace(str(tmp_path) + "/", "")
    assert message.startswith(expected) and "\n" not in message


def test_the_policy_comes_from_the_config(tmp_path):
    path = tmp_path / "thoth.toml"
    path.write_text('[privacy]\npii = ["ssn"]\n', encoding="utf-8")
    assert Redactor.from_config(load_config(path)) == Redactor(frozenset({"ssn"}))
    path.write_text("[privacy]\npii = []\n", encoding="utf-8")
    opted_out = Redactor.from_config(load_config(path))
    assert opted_out == Redactor(frozenset()) and opted_out.redact(f"ssn {SSN}") == f"ssn {SSN}"
    assert opted_out.redact("token ghp_" + "a1B2" * 9) == "token [REDACTED:github-token]", "secrets always"
    unset = load_config(tmp_path / "none.toml")
    assert unset.get("privacy.pii") == list(PII_KINDS) and Redactor.from_config(unset) == Redactor()
    assert redactor_of(object()) == Redactor() and redactor_of(None).redact(f"ssn {SSN}") == "ssn [REDACTED:ssn]"


def stored(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


async def test_two_runtimes_in_one_process_keep_their_own_policy(tmp_path):
    plugins = {"working": working, "identity": identity}
    replies = [{"purpose": "turn", "reply": "Noted."}, {"reply": "{}"}]
    default = make_test_runtime(tmp_path / "a", plugins, replies=replies)
    opted_out = make_test_runtime(tmp_path / "b", plugins, replies=replies, config={"privacy": {"pii": []}})
    said = f"charge {VISA}; my SSN is {SSN}; mail ann@example.com"
    for runtime in (default, opted_out, default, opted_out):  # interleaved, so neither sees the other's policy
        await runtime.turn(said, peer="ann", thread="t")
    refused = (await default.turn(f"/remember my card is {VISA}", peer="ann", thread="t")).reply.text
    kept = (await opted_out.turn(f"/remember my card is {VISA}", peer="ann", thread="t")).reply.text
    for runtime in (default, opted_out):
        await runtime.drain()
        await runtime.aclose()
    assert "not stored: that holds a secret (card-number)" in refused
    assert "not stored" not in kept
    a, b = stored(tmp_path / "a"), stored(tmp_path / "b")
    assert VISA.encode() not in a and SSN.encode() not in a and b"ann@example.com" not in a
    assert b"[REDACTED:card-number]" in a and b"[REDACTED:ssn]" in a and b"[REDACTED:email]" in a
    assert VISA.encode() in b and SSN.encode() in b, "with [privacy] pii = [], a card number is kept as typed"
    assert b"ann@example.com" in b and b"[REDACTED:" not in b


@pytest.mark.parametrize(
    "text",
    [
        "1" * 200_000,
        "1 " * 100_000,
        "12-" * 60_000,
        "1234 " * 40_000,
        "123-45-" * 30_000,
        "+1 " * 60_000,
        "(415) " * 30_000,
        "0" + " 12" * 60_000,
        "DE89 " * 40_000,
        "DE89" + "A" * 200_000,
        "AB 12 " * 30_000,
        "a@" * 100_000,
        "a" * 100_000 + "@" + "b." * 50_000,
        "a.b@" * 50_000,
        "phone: " + "1 " * 100_000,
        "ABCDEF12A34B" * 15_000,
    ],
    ids=lambda t: repr(t[:10]),
)
def test_pii_rules_stay_linear_on_digit_runs(text):
    started = time.process_time()
    redact(text)
    assert time.process_time() - started < 2.0
