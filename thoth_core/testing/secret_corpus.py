"""A corpus of chat sentences, each holding one fake secret of its own kind, and clean near-misses.

The secrets are generated from seeded randomness in each vendor's real format (random and
useless), so no live-looking key sits in the repository for a secret scanner to object to.
Each secret case lists the values that must not be kept anywhere; `pii` names the personal data
kind (`[privacy] pii`) a case needs. The obfuscated variants of issue 36 (an upper-case or spaced
prefix, a zero-width space or a Cyrillic letter inside a token, a base64-wrapped token, two
tokens glued together, a key said in prose) and its personal data (email, phone, IBAN, card,
national ids) are secret cases too. Near-misses look like secrets or personal data (a sha, a
UUID, a hex colour, a version, a date, a year, a price, a Luhn-invalid card number, an IBAN
whose checksum fails, "the password policy says 12 characters") and must be kept verbatim.
"""

from __future__ import annotations

import base64
import functools
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SecretCase", "iban", "luhn_check_digit", "near_miss_corpus", "secret_corpus"]

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class SecretCase:
    """One sentence: its kind, its text, the secret values in it (none for a near-miss), its PII kind, its group.

    `group` is `token` for a vendor's token or key as written, `obfuscated` for issue 36's disguised
    secrets, `personal` for its personal data (the bench reports each group's recall).
    """

    kind: str
    text: str
    values: tuple[str, ...] = ()
    pii: str | None = None
    group: str = "token"


class _Random:
    """Seeded random strings in the alphabets tokens use; every value holds a digit and both cases."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        while True:
            value = "".join(self.rng.choice(alphabet) for _ in range(n))
            wanted = [set(string.digits), set(string.ascii_lowercase), set(string.ascii_uppercase)]
            if all(set(value) & chars for chars in wanted if set(alphabet) & chars):
                return value

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice(string.digits) for _ in range(n))

    def pem(self, label: str, lines: int = 6) -> tuple[str, str]:
        """A PEM block and its base64 body's first line (the value that must vanish)."""
        body = [self.s(64, B64) for _ in range(lines)]
        return f"-----BEGIN {label}-----\n" + "\n".join(body) + f"\n-----END {label}-----", body[0]

    def luhn_card(self, prefix: str, length: int = 16) -> str:
        """A Luhn-valid card number with that issuer prefix, in groups of four."""
        number = prefix + self.digits(length - len(prefix) - 1)
        number += str(luhn_check_digit(number))
        return " ".join(number[i : i + 4] for i in range(0, length, 4))


def luhn_check_digit(partial: str) -> int:
    """The digit that makes `partial + digit` pass the Luhn check."""
    total = 0
    for i, c in enumerate(reversed(partial)):
        d = int(c) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return (10 - total % 10) % 10


def iban(country: str, bban: str) -> str:
    """The IBAN of a country and a BBAN, with its mod-97 check digits (ISO 13616), compact."""
    digits = "".join(str(int(c, 36)) for c in bban + country + "00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def grouped(value: str, size: int = 4) -> str:
    """A value in space-separated groups, as printed on a statement (`DE89 3704 0044 …`)."""
    return " ".join(value[i : i + size] for i in range(0, len(value), size))


DNI_LETTERS = "TRWAGMYFPDXBNJZSQVHLCKE"


def secret_corpus(seed: int = 19) -> list[SecretCase]:
    """One sentence per kind of secret, each value freshly made from `seed`."""
    r = _Random(seed)
    cases: list[SecretCase] = []

    def add(kind: str, text: str, *values: str, pii: str | None = None, group: str = "token") -> None:
        cases.append(SecretCase(kind, text, values, pii, group))

    aws_id, aws_secret = "AKIA" + r.s(16, UPPER), r.s(40, B64)
    add(
        "aws", f"For the deploy user: AWS_ACCESS_KEY_ID={aws_id} AWS_SECRET_ACCESS_KEY={aws_secret}", aws_id, aws_secret
    )
    gcp_key, gcp_body = r.pem("PRIVATE KEY")
    service_account = {
        "type": "service_account",
        "project_id": "acme-prod-4711",
        "private_key_id": r.s(40, HEX),
        "private_key": gcp_key + "\n",
        "client_email": "deployer@acme-prod-4711.iam.gserviceaccount.com",
    }
    add("gcp-service-account", "Here is the GCP service account json: " + json.dumps(service_account), gcp_body)
    azure = r.s(86, B64) + "=="
    add(
        "azure-storage",
        "The blob connection string is DefaultEndpointsProtocol=https;AccountName=acmeprod;"
        f"AccountKey={azure};EndpointSuffix=core.windows.net",
        azure,
    )
    anthropic = "sk-ant-api03-" + r.s(93, B64URL) + "AA"
    add("anthropic", f"Use my Anthropic key {anthropic} for the eval run.", anthropic)
    openai = "sk-proj-" + r.s(74, B64URL) + "T3BlbkFJ" + r.s(74, B64URL)
    add("openai", f"the openai one is {openai} if the other fails", openai)
    ghp = "ghp_" + r.s(36)
    add("github-classic", f"I made a classic GitHub token for CI: {ghp}", ghp)
    github_pat = "github_pat_11" + r.s(20, UPPER) + "_" + r.s(59)
    add("github-fine-grained", f"New fine-grained PAT (repo scope only) {github_pat}", github_pat)
    glpat = "glpat-" + r.s(20, B64URL)
    add("gitlab", f"gitlab runner registration uses {glpat} now", glpat)
    xoxb = f"xoxb-{r.digits(12)}-{r.digits(13)}-{r.s(24)}"
    add("slack-bot", f"The Slack bot token is {xoxb}, paste it into the app config.", xoxb)
    hook = f"https://hooks.slack.com/services/T{r.s(8, UPPER)}/B{r.s(10, UPPER)}/{r.s(24)}"
    add("slack-webhook", f"Post alerts to {hook} please", hook.rsplit("/", 1)[1])
    stripe = "sk_live_" + r.s(99)
    add("stripe", f"Stripe live secret: {stripe} (do not use in staging)", stripe)
    twilio_sid, twilio_token = "AC" + r.s(32, HEX), r.s(32, HEX)
    add("twilio", f"twilio account {twilio_sid} with TWILIO_AUTH_TOKEN={twilio_token}", twilio_sid, twilio_token)
    sendgrid = "SG." + r.s(22, B64URL) + "." + r.s(43, B64URL)
    add("sendgrid", f"SendGrid API key for the newsletter: {sendgrid}", sendgrid)
    npm = "npm_" + r.s(36)
    add("npm", f"publish with //registry.npmjs.org/:_authToken={npm}", npm)
    pypi = "pypi-AgEIcHlwaS5vcmcCJD" + r.s(120, B64URL)
    add("pypi", f"the PyPI upload token is {pypi}", pypi)
    hf = "hf_" + r.s(34, string.ascii_letters)
    add("huggingface", f"HuggingFace read token {hf} works for the gated model", hf)
    jwt = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJ" + r.s(60, B64URL) + "." + r.s(43, B64URL)
    add("jwt", f"my session cookie was {jwt} when it broke", jwt.split(".", 1)[1])
    for label, kind in (
        ("OPENSSH PRIVATE KEY", "openssh-key"),
        ("RSA PRIVATE KEY", "rsa-key"),
        ("EC PRIVATE KEY", "ec-key"),
    ):
        block, body = r.pem(label)
        add(kind, f"this is the deploy key for the box:\n{block}\nthanks", body)
    for scheme, user, host, kind in (
        ("postgresql", "app", "db.internal:5432/app", "postgres-url"),
        ("mysql", "root", "10.0.4.12:3306/shop", "mysql-url"),
        ("mongodb+srv", "reporting", "cluster0.x7k2p.mongodb.net/analytics", "mongodb-url"),
        ("redis", "", "cache.internal:6379/0", "redis-url"),
    ):
        password = r.s(20)
        add(kind, f"connect with {scheme}://{user}:{password}@{host} from the worker", password)
    wifi = "Tr0ub4dor" + r.s(6)
    add("password-colon", f"The office wifi password: {wifi}", wifi)
    passwd = r.s(14)
    add("passwd-assignment", f"ldap bind works with binddn=cn=admin passwd={passwd} on port 389", passwd)
    said = "Sw0rdf1sh" + r.s(5)
    add("password-prose", f"my email password is {said} if you need to log in", said)
    db_password = r.s(24)
    add("export-password", f"run `export DB_PASSWORD={db_password}` before the migration", db_password)
    basic = r.s(16)
    add("basic-auth-url", f"the jenkins api is at https://deploy:{basic}@ci.acme.dev/job/main/build", basic)
    google = "AIza" + r.s(35, B64URL)
    add("google-api-key", f"maps widget key {google}", google)
    user_id = base64.b64encode(r.digits(18).encode()).decode().rstrip("=")
    discord = f"{user_id}.{r.s(6, B64URL)}.{r.s(38, B64URL)}"
    add("discord", f"discord bot token {discord} for the community server", discord)
    telegram = f"{r.digits(10)}:AA{r.s(33, B64URL)}"
    add("telegram", f"the telegram bot (@acme_alerts_bot) token is {telegram}", telegram)
    card = r.luhn_card("4" + r.digits(5))
    add("card", f"charge it to my card {card}, exp 09/28", card, pii="card")
    ssn = f"{r.rng.randint(100, 665)}-{r.rng.randint(10, 99)}-{r.rng.randint(1000, 9999)}"
    add("ssn", f"for the W-9 form my SSN is {ssn}", ssn, pii="ssn")
    _obfuscated(r, functools.partial(add, group="obfuscated"))
    _personal(r, functools.partial(add, group="personal"))
    return cases


def _obfuscated(r: _Random, add: Callable[..., None]) -> None:
    """Issue 36's variants that passed the redactor: case, spacing, invisible and look-alike characters, wrapping."""
    upper = "GHP_" + r.s(36)
    add("github-upper-case", f"the CI token (upper-cased by the form) is {upper}", upper, upper[4:])
    spaced = " ".join("ghp_" + r.s(36))
    add("github-spaced", f"here it is spaced out so the bot misses it: {spaced} ok", spaced, spaced[8:40])
    body = r.s(36)
    add("github-spaced-prefix", f"token g h p _ {body} for the runner", body)
    body = r.s(36)
    zero_width = "ghp_" + body[:12] + "\u200b" + body[12:]
    add("github-zero-width", f"copy this: {zero_width} into the secret store", zero_width, body[12:], body[:12])
    body = r.s(16, UPPER)
    add("aws-homoglyph", f"the key id is \u0410KIA{body} for prod", body)  # a Cyrillic capital A
    body = r.s(16, UPPER)
    lower = ("AKIA" + body).lower()
    add("aws-lower-case", f"aws id {lower} in lower case", lower)
    token = "ghp_" + r.s(36)
    wrapped = base64.b64encode(token.encode()).decode()
    add("github-base64", f"base64 so it survives the pipe: {wrapped}", wrapped, token)
    pw = r.s(14)
    add("password-pw", f"the router pw is {pw} btw", pw)
    aws, ghp = "AKIA" + r.s(16, UPPER), "ghp_" + r.s(36)
    add("aws-glued-github", f"both keys pasted together: {aws}{ghp}", aws, ghp)
    prose = r.s(32, HEX)
    add("api-key-in-prose", f"the api key for the billing service is {prose}, keep it safe", prose)
    said = r.s(24)
    add("token-in-prose", f"Here's the token we use for the staging bucket: {said}", said)


def _personal(r: _Random, add: Callable[..., None]) -> None:
    """Issue 36's personal data: email, phone, IBAN, card and national ids, each in a sentence of its own."""
    add("email", "write to ann.lee@example.com about it", "ann.lee@example.com", pii="email")
    work = "Ann.Lee+thoth@mail.acme-corp.co.uk"
    add("email-plus", f"my work address is {work}.", work, pii="email")
    add("phone-international", "call me at +1 415-555-0132 after six", "+1 415-555-0132", pii="phone")
    add("phone-uk", "my mobile: +44 7700 900123 (evenings)", "+44 7700 900123", pii="phone")
    add("phone-us-national", "the dentist is (415) 555-0198, ask for Jo", "(415) 555-0198", pii="phone")
    add("phone-national-trunk", "ring the office on 020 7946 0958 tomorrow", "020 7946 0958", pii="phone")
    add("phone-after-keyword", "phone: 4155550123 if the app is down", "4155550123", pii="phone")
    de = iban("DE", r.digits(18))
    add("iban-grouped", f"send the deposit to my IBAN {grouped(de)} please", grouped(de), pii="iban")
    gb = iban("GB", "WEST" + r.digits(14))
    add("iban-compact", f"refund to {gb}, thanks", gb, pii="iban")
    card = r.luhn_card("5" + str(r.rng.randint(1, 5)) + r.digits(4)).replace(" ", "")
    add("card-compact", f"my mastercard is {card} exp 11/27", card, pii="card")
    ssn = f"{r.rng.randint(100, 665)}{r.rng.randint(10, 99)}{r.rng.randint(1000, 9999)}"
    add("ssn-after-keyword", f"SSN {ssn} on the form", ssn, pii="ssn")
    nino = f"AB {r.digits(2)} {r.digits(2)} {r.digits(2)} C"
    add("uk-nino", f"my national insurance number is {nino}", nino, pii="national-id")
    number = r.rng.randint(10_000_000, 99_999_999)
    dni = f"{number}{DNI_LETTERS[number % 23]}"
    add("es-dni", f"mi DNI es {dni} para la reserva", dni, pii="national-id")
    es = iban("ES", r.digits(20))  # the mod-97 check holds; Spain's own account check digits may not
    add("iban-spanish", f"la devolución a mi IBAN {es}, gracias", es, pii="iban")


def near_miss_corpus(seed: int = 19) -> list[SecretCase]:
    """Sentences that look like they hold secrets but do not; all must be kept verbatim."""
    r = _Random(seed + 1)
    uuid = "-".join(r.s(n, HEX) for n in (8, 4, 4, 4, 12))
    card_like = r.luhn_card("4" + r.digits(5))
    luhn_invalid = card_like[:-1] + str((int(card_like[-1]) + 1) % 10)
    image_id = base64.b64encode(b"img_20240315_0017.png").decode()
    good = iban("DE", r.digits(18))
    iban_bad = good[:2] + f"{(int(good[2:4]) + 1) % 100:02d}" + good[4:]  # check digits off by one
    luhn_compact = luhn_invalid.replace(" ", "")
    number = r.rng.randint(10_000_000, 99_999_999)
    dni_bad = f"{number}{DNI_LETTERS[(number + 1) % 23]}"
    texts = [
        ("commit-sha", f"fixed in commit {r.s(40, HEX)} on main"),
        ("uuid", f"the request id was {uuid}"),
        ("luhn-invalid", f"tracking number {luhn_invalid} for the parcel"),
        ("isbn", "the book is ISBN 978-0-13-468599-1"),
        ("version", "we upgraded to v2.14.3-rc.1 last night"),
        ("image-id", f"the base64 image id is {image_id}"),
        ("date", "the incident started 2024-03-15T09:30:00Z"),
        ("password-policy", "the password policy says 12 characters"),
        ("key-under-mat", "my key is under the mat"),
        ("file-path", "the config lives in /home/ann/.ssh/config and ~/.aws/credentials"),
        ("order-number", "order #A-20240315-88213 shipped"),
        ("invalid-ssn", "the form code 900-12-3456 is not a social security number"),
        ("password-reset", "the password reset email went out at noon"),
        ("token-expired", "token: expired"),
        ("api-key-rotation", "the API key rotation is due Friday"),
        ("image-digest", f"pull the image at sha256:{r.s(64, HEX)}"),
        ("ip-port", "the database is 10.0.3.17:5432 behind the vpn"),
        ("url-no-password", "connect to postgres://db.internal:5432/app as the app user"),
        ("aws-arn", "assume arn:aws:iam::123456789012:role/deploy for that"),
        ("config-key", "set PASSWORD_MIN_LENGTH=12 in the config"),
        ("short-sha", "revert abc1234 and 9f8e7d6 please"),
        ("slack-ids", "the channel C024BE91L and user U0G9QF9C6"),
        ("sku", "the SKU is sk-2291-blue-large"),
        ("prefix-talk", "ghp_ and glpat- are token prefixes, AKIA starts AWS key ids"),
        ("card-last-four", "the card ending in 4242 was declined"),
        ("epoch", "the message ts is 1700000000.000100"),
        ("url-query", "see localhost:8080/api/v1/users?page=2&limit=50"),
        ("amount", "invoice INV-2024-000123 totals 1,234,567.89 EUR"),
        # issue 36: what the personal data detectors and the normalised pass must leave alone
        ("hex-colour", "the button is #1a2b3c with a #FFCC00 border and #0f0 text"),
        ("key-word-then-sha", f"the key change landed in commit {r.s(40, HEX)} yesterday"),
        ("token-word-then-build", f"token refresh is fixed in build {r.s(32, HEX)} now"),
        ("key-word-then-uuid", f"the key question is why request {uuid} failed"),
        ("password-word-then-date", "my password for the portal expires 2025-01-31T00:00:00Z"),
        ("api-key-no-value", "the api key for the billing service is in the vault, ask Ann"),
        ("versions", "python 3.11.4, node v20.10.0 and postgres 16.2 on ubuntu 24.04"),
        ("dates", "due 03/15/2024, or 15.03.2024, or 2024/03/15 at 09:30"),
        ("years", "born in 1984, moved in 2019, and 2024 was a busy year"),
        ("prices", "it cost $1,299.99, or 1 299,99 EUR, down from 1499"),
        ("population", "the city had 8 336 817 people in 2023 and 9 000 000 by 2030"),
        ("scores", "the score went +3 then +12 and the delta was -12.5"),
        ("order-numbers", "order 112-4567890-1234567 and ticket #48213 are linked"),
        ("order-hash-number", "order #0012 3456 7890 shipped on 2024-03-15"),
        ("iban-bad-checksum", f"the IBAN {grouped(iban_bad)} bounced, the check digits are wrong"),
        ("iban-like-code", "the part number DE12 ABCD 1234 5678 is out of stock"),
        ("card-compact-invalid", f"reference {luhn_compact} for the claim"),
        ("dni-bad-letter", f"parcel code {dni_bad} at the counter"),
        ("invalid-ssn-666", "the test form uses 666-12-3456 as a dummy"),
        ("spelled-out", "it is spelled g r e e n, not grün, and a + b * c = d"),
        ("cyrillic-prose", "Привет, как дела? Всё хорошо, спасибо."),
        ("accented-prose", "Le café coûte 3,50 € à Montréal, déjà payé."),
        ("fullwidth-prose", "ＡＢＣ ｄｅｆ and ｔｈｅ ｏｒｄｅｒ １２３"),
        ("zero-width-prose", "hello\u200bworld and word\u200djoiner"),
        ("greek-prose", "the angle α is 30° and β = 2π/3"),
        ("base64-sentence", f"the note was {base64.b64encode(b'hello world, this is just a plain note').decode()}"),
        ("place-names", "Slovakia, Akiak and the GHP team meet in Ghana"),
        ("pw-abbrev", "the PW-2000 pump and the pw rating of 12 kW"),
        ("email-like", "git@github.com:ann/thoth.git, pkg@1.2.3 and @ann on Slack"),
        ("secret-word-then-id", "the secret santa draw was id 20241224"),
    ]
    return [SecretCase(kind, text) for kind, text in texts]
