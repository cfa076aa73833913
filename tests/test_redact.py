"""Redaction corpus: real-format (generated, fake) secrets are redacted whole; ordinary text is untouched.

The secrets are generated here from seeded randomness in each vendor's real format, so no
live-looking key sits in the repository for a secret scanner to object to.
"""

from __future__ import annotations

import random
import string
import subprocess
import sys

import pytest

from thoth_core.redact import PII_RULES, RULES, find_secrets, redact, redact_tree, settled

rng = random.Random(20261121)
ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def r(n: int, alphabet: str = ALNUM) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def digits(n: int) -> str:
    return r(n, string.digits)


def upper(n: int) -> str:
    return r(n, string.ascii_uppercase + string.digits)


def hexs(n: int) -> str:
    return r(n, "0123456789abcdef")


def pem(label: str) -> str:
    body = "\n".join(r(64, ALNUM + "+/") for _ in range(4))
    return f"-----BEGIN {label}-----\n{body}\n{r(20, ALNUM + '+/')}==\n-----END {label}-----"


def jwt() -> str:
    return f"eyJ{r(30, B64URL)}.eyJ{r(60, B64URL)}.{r(43, B64URL)}"


# (kind, secret as it appears, the part that must vanish)
SECRETS: list[tuple[str, str, str]] = []


def add(kind: str, secret: str, core: str | None = None) -> None:
    SECRETS.append((kind, secret, core or secret))


for prefix in ("sk-ant-api03-", "sk-ant-admin01-", "sk-ant-oat01-"):
    add("anthropic-key", prefix + r(93, B64URL) + "AA")
add("anthropic-key", "sk-ant-api03-" + r(40, B64URL) + "-" + r(12, B64URL))
add("openai-key", "sk-proj-" + r(48, B64URL))
add("slack-token", f"xoxb-{digits(12)}-{digits(13)}-{r(24)}")
add("slack-token", f"xoxp-{digits(12)}-{digits(12)}-{digits(13)}-{hexs(32)}")
add("slack-token", f"xapp-1-A0{upper(9)}-{digits(13)}-{hexs(64)}")
add("slack-token", f"xoxe-1-{r(140)}")
add("slack-token", f"xoxe.xoxp-1-{r(160)}")
add("slack-token", f"xoxa-2-{digits(12)}-{r(24)}")
add("slack-webhook", f"https://hooks.slack.com/services/T{upper(8)}/B{upper(10)}/{r(24)}")
for prefix in ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"):
    add("github-token", prefix + r(36))
add("github-token", f"github_pat_11{upper(20)}_{r(59)}")
add("aws-access-key", "AKIA" + upper(16))
add("aws-access-key", "ASIA" + upper(16))
secret_key = r(40, ALNUM + "/+")
add("assigned-secret", f"aws_secret_access_key = {secret_key}", secret_key)
for label in ("RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY"):
    add("private-key", pem(label))
add("jwt", jwt())
add("jwt", jwt())
for url, password in (
    ("postgres://app:{p}@db.internal:5432/app", r(18)),
    ("https://admin:{p}@example.com/admin", r(12) + "!x"),
    ("redis://:{p}@cache:6379/0", r(24)),
    ("mongodb+srv://svc:{p}@cluster0.example.net/db", r(16)),
    ("ftp://ann:{p}@files.example.org/", r(10)),
):
    add("url-password", url.format(p=password), password)
bearer = r(48, B64URL + ".")
add("bearer-token", f"Authorization: Bearer {bearer}", bearer)
pw = r(14)
add("assigned-secret", f"password={pw}", pw)
pw2 = r(11)
add("assigned-secret", f'"api_key": "{pw2}"', pw2)
add("google-api-key", "AIza" + r(35, B64URL))
add("stripe-key", "sk_live_" + r(32))

CONTEXTS = [
    "my key is {s}.",
    "export TOKEN_VALUE={s}",
    "Here it is: ({s}) - keep it safe",
    "Use {s} for the deploy, then rotate it",
    "'{s}'",
    "The config line reads {s}\nand nothing else.",
]

ORDINARY = [
    "Ask Anthropic about the sk-ant prefix format.",
    "The skeleton key opened the old garden gate.",
    "xoxo, see you tomorrow at the standup!",
    "We pushed to GitHub; ghp_ is the classic token prefix.",
    "AKIA is how AWS access key ids begin.",
    "The token expired, so please log in again.",
    "My password is not something I share with anyone.",
    "Visit https://example.com/docs/getting-started for more.",
    "Connect to postgres://db.internal:5432/app with your own account.",
    "Email me at the usual address tomorrow morning.",
    "The ratio was 3:1 at 10:30 today.",
    "eyJ is what base64-encoded JSON usually starts with.",
    "Use Bearer authentication for the internal API.",
    "A key-value store keeps pairs of keys and values.",
    "The secret to good bread is patience and time.",
    "Her api key rotation policy is quarterly.",
    "Set the password field to required in the sign-up form.",
    "sk-learn is a common misspelling of scikit-learn.",
    "The BEGIN and END markers frame a PEM block.",
    "Slack's xapp tokens and xoxb tokens have different scopes.",
    "github_pat is the fine-grained token prefix on GitHub.",
    "Supercalifragilisticexpialidocious is a very long word indeed.",
    "Refactor AKIAXYZ into a named constant.",
    "ghost_protocol_enabled was true during the test.",
    "The commit 3f2a9c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a39 fixed the bug.",
    "In Python, token = tokens[0] picks the first one.",
    "Passwords: they should be long and unique.",
    "Deploy went fine on Tuesday; the rollback plan was not needed.",
    "Ann prefers short answers with code examples first.",
    "We meet every Thursday at 14:00 UTC in the #infra channel.",
    "Run the migration before 09:00 so the dashboards stay green.",
    "The file lives at /home/ann/projects/thoth/README.md.",
    "Version 2.7.3 of honcho-ai fixed the timeout handling.",
    "user@host:~$ is the prompt shape on that server.",
]


def test_corpus_sizes():
    assert len(SECRETS) >= 30 and len(ORDINARY) >= 30


@pytest.mark.parametrize(("kind", "secret", "core"), SECRETS, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(SECRETS)])
def test_every_secret_is_redacted_whole_in_every_context(kind, secret, core):
    for context in CONTEXTS:
        text = context.format(s=secret)
        out = redact(text)
        assert core not in out, f"{kind} survived in {out!r}"
        tail, head = core[-8:], core[:12]
        assert tail not in out and (head not in out or head in context), f"{kind} left a fragment: {out!r}"
        assert "[REDACTED:" in out
        assert redact(out) == out, "redaction is idempotent"


@pytest.mark.parametrize("sentence", ORDINARY)
def test_ordinary_sentences_are_unchanged(sentence):
    assert redact(sentence) == sentence
    assert find_secrets(sentence) == []


def test_kinds_are_named_and_tree_redaction_reaches_nested_values():
    key = SECRETS[0][1]
    assert find_secrets(f"x {key} y") == ["anthropic-key"]
    tree = redact_tree({"notes": [f"key {key}"], "updates": {"ann": [f"pw postgres://a:{'p' * 9}@h"]}, "n": 3})
    assert key not in str(tree) and "p" * 9 not in str(tree) and tree["n"] == 3


def test_an_unterminated_private_key_is_redacted_to_the_end():
    text = "start\n-----BEGIN RSA PRIVATE KEY-----\n" + r(64) + "\n" + r(64)
    assert redact(text) == "start\n[REDACTED:private-key]"


def test_every_rule_compiles_on_first_use():
    """Importing the table compiles nothing (every command imports it); each expression is still valid."""
    code = (
        "import thoth_core.cli, thoth_core.redact as r, thoth_core.pii_rules as p\n"
        "rules = [*r.RULES, *(rule for kind in p.PII_RULES.values() for rule in kind)]\n"
        "print(sum('regex' in vars(x) for x in rules))"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "0\n"
    rules = [*RULES, *(rule for kind in PII_RULES.values() for rule in kind)]
    assert len(rules) > len(RULES) + len(PII_RULES)  # some kinds have several rules (phone, national-id)
    assert all(rule.regex.groupindex.get("secret") for rule in rules)
    assert all(rule.key is None or rule.key.pattern.endswith(r"\Z") for rule in rules)


def test_compile_soon_compiles_every_rule_on_a_thread():
    """A turn starts the compile while its model answers, so keeping the turn does not wait for it."""
    code = (
        "import time, thoth_core.redact as r\n"
        "r.Redactor().compile_soon()\n"
        "end = time.monotonic() + 30\n"
        "done = lambda: all('regex' in vars(x) and 'key' in vars(x) for x in r.RULES)\n"
        "while time.monotonic() < end and not done(): time.sleep(0.01)\n"
        "print(done())"
    )
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "True\n"


@pytest.mark.parametrize(
    ("arriving", "kept"),
    [
        ("Done.", "Done."),  # a plain last word: shown, kept
        ("Your key is sk-ant-api03-QQQQ", "Your key is "),  # may be a secret's start: waits for the rest
        ("x " + "Q" * 30, "x "),  # letters only, but longer than a word
        ("grüße aus Köln", "grüße aus Köln"),
        ("sk-an", "sk-an"),  # too short to hold anything of a secret but its public prefix
        ("", ""),
    ],
)
def test_settled_holds_back_a_last_word_that_may_start_a_secret(arriving, kept):
    assert settled(arriving) == kept
