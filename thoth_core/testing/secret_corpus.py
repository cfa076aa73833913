"""A corpus of chat sentences, each holding one fake secret of its own kind, and clean near-misses.

The secrets are generated from seeded randomness in each vendor's real format (random and
useless), so no live-looking key sits in the repository for a secret scanner to object to.
Each secret case lists the values that must not be kept anywhere; `pii` names the opt-in kind
(`[privacy] pii`) a case needs. Near-misses look like secrets (a sha, a UUID, a Luhn-invalid
card number, "the password policy says 12 characters") and must be kept verbatim.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["SecretCase", "luhn_check_digit", "near_miss_corpus", "secret_corpus"]

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
HEX = "0123456789abcdef"
UPPER = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class SecretCase:
    """One sentence: its kind, its text, the secret values in it (none for a near-miss), the PII opt-in it needs."""

    kind: str
    text: str
    values: tuple[str, ...] = ()
    pii: str | None = None


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


def secret_corpus(seed: int = 19) -> list[SecretCase]:
    """One sentence per kind of secret, each value freshly made from `seed`."""
    r = _Random(seed)
    cases: list[SecretCase] = []

    def add(kind: str, text: str, *values: str, pii: str | None = None) -> None:
        cases.append(SecretCase(kind, text, values, pii))

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
    return cases


def near_miss_corpus(seed: int = 19) -> list[SecretCase]:
    """Sentences that look like they hold secrets but do not; all must be kept verbatim."""
    r = _Random(seed + 1)
    uuid = "-".join(r.s(n, HEX) for n in (8, 4, 4, 4, 12))
    card_like = r.luhn_card("4" + r.digits(5))
    luhn_invalid = card_like[:-1] + str((int(card_like[-1]) + 1) % 10)
    image_id = base64.b64encode(b"img_20240315_0017.png").decode()
    texts = [
        ("commit-sha", f"fixed in commit {r.s(40, HEX)} on main"),
        ("uuid", f"the request id was {uuid}"),
        ("luhn-invalid", f"tracking number {luhn_invalid} for the parcel"),
        ("isbn", "the book is ISBN 978-0-13-468599-1"),
        ("phone", "call me at +1 415-555-0132 after six"),
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
        ("email", "write to ann.lee@example.com about it"),
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
    ]
    return [SecretCase(kind, text) for kind, text in texts]
