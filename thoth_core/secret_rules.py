"""The table of secret kinds `redact` knows: one named expression per token format (compiled on first use).

The table covers the token formats of gitleaks' default rules (`config/gitleaks.toml`) plus a
few it lacks (Azure storage keys and SAS signatures, Discord bot tokens and webhooks, Twilio
account SIDs, Google OAuth secrets, Stripe webhook secrets). Each expression has a group
`secret`, the exact span that is replaced; everything else in the match (a key name, an
`=`, a URL's user name) is context and stays. Three kinds of rule:

- a vendor prefix plus a realistic length (`glpat-…`, `hf_…`, `SG.….…`), matched only as a
  whole token (`B` / `E`: not inside another identifier);
- a URL or header shape (`https://hooks.slack.com/…`, `user:pass@host`, `Bearer …`);
- a value assigned to a secret-sounding key (`DB_PASSWORD=…`, `"api_key": "…"`, `my password is …`, or
  gitleaks' vendor-keyed rules such as `DISCORD_CLIENT_SECRET=…`), where the value must also
  look random (`check`), so `token: expired` or `password reset email` stay.

`keywords` are lower-case literals, one of which every match contains: a rule whose keywords
are all absent from a text is skipped (gitleaks does the same), which keeps prose fast.
Every repetition that a fixed character follows is possessive or bounded, so no input makes
an expression backtrack without end.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

B = r"(?<![A-Za-z0-9_\-])"  # token start: not inside another token
E = r"(?![A-Za-z0-9_\-])"  # token end
E64 = r"(?![A-Za-z0-9_\-+/=])"  # end of a base64 token
UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


@dataclass(frozen=True)
class SecretRule:
    """One kind of secret: label, expression (group `secret`; compiled on first use), prefilter and validator."""

    kind: str
    expression: str  # compiled by `regex` when first used: every command imports this table, few redact
    keywords: tuple[str, ...] = ()  # the text must hold one (lower case); with a key, every key holds one
    check: Callable[[str], bool] | None = None
    key_expression: str | None = None  # what the text just before the match must end with ...
    key_reach: int = 0  # ... within this many characters
    bounded: bool = False  # the match must start a token (not continue an identifier)
    rescan: bool = True  # on a key miss, search again inside the match (its value may hold the key: `X=password=…`)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The compiled expression."""
        return re.compile(self.expression)

    @cached_property
    def key(self) -> re.Pattern[str] | None:
        """The compiled key expression, if the rule has one."""
        return None if self.key_expression is None else re.compile(self.key_expression)


def entropy(value: str) -> float:
    """Shannon entropy of a string in bits per character."""
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values()) if n else 0.0


def _digit(value: str) -> bool:
    return any(c.isdigit() for c in value)


def _mixed(value: str) -> bool:
    return any(c.isupper() for c in value) and any(c.islower() for c in value)


def _all3(value: str) -> bool:
    return _digit(value) and _mixed(value)


def _b64(value: str) -> bytes:
    value = value.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
    except (binascii.Error, ValueError):
        return b""


def _discord(value: str) -> bool:
    return _b64(value.split(".", 1)[0]).isdigit()  # the first part is a base64 user id


def _artifactory_ref(value: str) -> bool:
    return _b64(value).startswith(b"reftkn")


def _b64_jwt(value: str) -> bool:
    return b"." in _b64(value.rstrip("="))


def _not_a_word(value: str) -> bool:
    return not value.isalpha()


def _basic(value: str) -> bool:
    decoded = _b64(value)
    return b":" in decoded and decoded.isascii()


_ISO_TIME = re.compile(r"\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:\.\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?")


def looks_random(value: str, min_len: int = 8, min_entropy: float = 2.5) -> bool:
    """A value that reads like a credential: long, letters with digits (or long mixed case), not a path or URL."""
    if len(value) < min_len or value[0] in "/.~$%<{[" or "://" in value or _ISO_TIME.fullmatch(value):
        return False
    letters = any(c.isalpha() for c in value)
    if not (letters and (_digit(value) or (len(value) >= 16 and _mixed(value)))):
        return False
    return entropy(value) >= min_entropy


# Measured on the corpus (`bench/secret_detection.py`, `tests/test_secrets_in_prose.py`): random keys of 12+
# characters have 3.3-4.9 bits per character (hex 3.3-4.0), the ids and words near a key word 2.2-3.2.
PROSE_ENTROPY = 3.3
_UUID = re.compile(UUID)
# A name made of words (`ClearTextPassword`, `staging_bucket_v2`, `ServiceAccountKey2024`): each capital starts a
# word of 2+ small letters (or an acronym), digits only in short runs between words. A random key has a capital
# or a letter alone between digits somewhere.
_WORD = r"(?:[A-Z]?[a-z]{2,}|[A-Z]{2,}(?![a-z]))"
_IDENTIFIER = re.compile(_WORD + r"(?:[_\-.]?(?:" + _WORD + r"|[a-z]?\d{1,4}(?![a-z])))*+")


def prose_secret(value: str) -> bool:
    """A value a few words after a key word that is surely a credential: 12+ characters, random, no UUID or name."""
    return looks_random(value, 12, PROSE_ENTROPY) and not _UUID.fullmatch(value) and not _IDENTIFIER.fullmatch(value)


def _vendor_value(value: str) -> bool:
    return looks_random(value, 14, 3.0) or (value.isdigit() and len(value) >= 16)  # client ids are digits


def _rule(
    kind: str,
    pattern: str,
    keywords: tuple[str, ...] = (),
    check: Callable[[str], bool] | None = None,
    *,
    bounded: bool = False,
) -> SecretRule:
    return SecretRule(kind, pattern, keywords, check, bounded=bounded)


def _keyed(
    key: str,
    reach: int,
    value: str,
    keywords: tuple[str, ...],
    check: Callable[[str], bool] | None,
    *,
    rescan: bool = True,
) -> SecretRule:
    """A value assigned to a key: the expression starts at the operator (fast on prose), the key is checked after."""
    return SecretRule("assigned-secret", value, keywords, check, "(?:" + key + r")\Z", reach, rescan=rescan)


def _token(
    kind: str,
    body: str,
    check: Callable[[str], bool] | None = None,
    *,
    end: str = E,
    keywords: tuple[str, ...] = (),
) -> SecretRule:
    """A whole token: `body` from a token start (checked by `redact`, so a literal prefix stays fast) to a token end."""
    return SecretRule(kind, "(?P<secret>" + body + ")" + end, keywords, check, bounded=True)


# Keys whose value is a secret whatever the service (`DB_PASSWORD`, `clientSecret`, `X-Api-Key`).
_KEY_WORDS = (
    r"passw(?:or)?d|passphrase|pwd|pw|pass|secret[ _.\-]?(?:access[ _.\-]?)?key|secret|token|credentials?|creds"
    r"|api[ _.\-]?key|apikey|access[ _.\-]?key|private[ _.\-]?key|signing[ _.\-]?key|encryption[ _.\-]?key"
    r"|master[ _.\-]?key|license[ _.\-]?key|account[ _.\-]?key|auth[ _.\-]?key"
)
# gitleaks' vendor-keyed rules (`<vendor>… = <value>`), plus detect-secrets' keyed ones.
_VENDORS = (
    "adafruit|adobe|airtable|algolia|alibaba|asana|atlassian|confluence|jira|beamer|bitbucket|bittrex|meraki"
    "|cloudflare|codecov|cohere|co_api_key|coinbase|confluent|contentful|datadog|dnkey|discord|droneci|dropbox"
    "|etsy|facebook|fastly|finicity|finnhub|flickr|freshbooks|gitter|gocardless|heroku|hubspot|intercom|jfrog"
    "|artifactory|bintray|xray|kraken|kucoin|launchdarkly|linear|linked[_-]?in|lob|mailchimp|mailgun|mapbox"
    "|mattermost|message[_-]?bird|netlify|new[_-]?relic|nytimes|okta|plaid|private[_-]?ai|rapidapi|sendbird"
    "|sentry|snyk|sonar|squarespace|sumo|telegr(?:am)?|travis|twitch|twitter|typeform|yandex|zendesk|contribsys"
    "|twilio|ibm|softlayer|cloudant"
)
_WORD_START = r"(?:(?<![A-Za-z])|(?<=[a-z])(?=[A-Z]))"  # start of a word or of a camelCase part
_KEY_END = r"[\"']?[ \t]{0,8}"  # between a key and its operator
_OP = r"(?:=>|:=|=|:)[ \t]{0,8}+[\"'\x60]?"
_PART = r"(?:[^\s\"'\x60,;<>()\[\]{}&=:]|&(?![A-Za-z_][\w.\-]{0,64}+=)){1,256}+"
# A value: at most one inner `:` (`hex:hex`), so it never runs over the next `key:` and scanning stays linear.
_VALUE = _PART + "(?::" + _PART + r")?+={0,3}(?=[\s\"'\x60,;<>)\]}&]|$)"

# A key word, then up to 6 words of the same clause, the last not one naming another kind of id (`commit`).
_PROSE_KEY = (
    r"(?i:\b(?:" + _KEY_WORDS + r"|key|passcode)s?\b(?:[ \t]+[^\s.!?;,]{1,24}+){0,6}?"
    r"(?<!commit)(?<!sha)(?<!hash)(?<!build)(?<!order)(?<!version)(?<!ticket)(?<!invoice)(?<!tracking)"
    r"(?<!request)(?<!\bid)(?<!uuid)(?<!\bref)(?<!number)(?<!release)(?<!revision)(?<!\brev)(?<!digest)"
    r"(?:[ \t]*[:=]|[ \t]+(?:is|was))?[ \t]{0,3}+)\Z"
)
# The value's match starts at the blank before it (a literal first character keeps the scan fast).
_PROSE_VALUE = (
    r"[ \t\n:=][\"'\x60]?(?P<secret>[A-Za-z0-9][A-Za-z0-9_\-+/=~]{11,127}+)(?=[\s\"'\x60,;)\]}]|\.(?:\s|$)|$)"
)

RULES: tuple[SecretRule, ...] = (
    _rule(
        "private-key",
        r"(?P<secret>-----BEGIN[A-Z0-9 _\-]{0,100}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]*?-----END[A-Z0-9 _\-]{0,100}PRIVATE KEY(?: BLOCK)?-----|[\s\S]*))",
    ),
    # AI providers
    _token("anthropic-key", r"sk-ant-[A-Za-z0-9_\-]{16,}+", _digit),
    _token("openai-key", r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{32,}+", _digit),
    _token("huggingface-token", r"hf_[A-Za-z0-9]{30,}+", _mixed),
    _token("huggingface-token", r"api_org_[A-Za-z0-9]{30,}+", _mixed),
    _token("perplexity-key", r"pplx-[A-Za-z0-9]{48}"),
    # Chat
    _token("slack-token", r"xox[abposrecd](?:\.xox[a-z])?-[A-Za-z0-9\-]{10,}+", _digit),
    _token("slack-token", r"xapp-[A-Za-z0-9\-]{10,}+", _digit),
    _rule(
        "slack-webhook", r"(?P<secret>https?://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+\-]++)"
    ),
    _token("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/+\-]++", end=""),
    _token("discord-token", r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,40}", _discord),
    _rule(
        "discord-webhook",
        r"(?P<secret>https://(?:(?:canary|ptb)\.)?discord(?:app)?\.com/api/webhooks/\d{5,30}/[A-Za-z0-9_\-]{30,}+)",
    ),
    _rule(
        "teams-webhook",
        r"(?P<secret>https://[a-z0-9\-]+\.webhook\.office\.com/webhookb2/[a-z0-9\-]{36}@[a-z0-9\-]{36}"
        r"/IncomingWebhook/[a-z0-9]{32}/[a-z0-9\-]{36}(?:/[A-Za-z0-9_\-]+)?)",
    ),
    _token("telegram-bot-token", r"\d{5,16}:A[A-Za-z0-9_\-]{34}", keywords=(":a",)),
    # Code hosting and packages
    _token("github-token", r"gh[pousr]_[A-Za-z0-9]{30,}+"),
    _token("github-token", r"github_pat_[A-Za-z0-9_]{30,}+"),
    _token(
        "gitlab-token",
        r"gl(?:pat|oas|dt|rtr?|ft|imt|agent|soat|ffct|ptt|cbt|wt|tst)-[A-Za-z0-9_\-]{20,}+"
        r"(?:\.(?=[0-9a-z]*\d)[0-9a-z]{2,9}){0,2}",  # a routable token's `.01.abc1234` tail
    ),
    _token("gitlab-token", r"GR1348941[A-Za-z0-9_\-]{20,}+"),
    _rule("gitlab-token", r"_gitlab_session=(?P<secret>[0-9a-z]{32})" + E),
    _token("npm-token", r"npm_[A-Za-z0-9]{36}", lambda v: _digit(v) or _mixed(v)),
    _token("pypi-token", r"pypi-AgE[A-Za-z0-9_\-]{50,}+"),
    _token("rubygems-token", r"rubygems_[a-f0-9]{48}"),
    _token("clojars-token", r"CLOJARS_[A-Za-z0-9]{60}"),
    _token("artifactory-key", r"AKC[A-Za-z0-9]{10,}+", _all3),  # detect-secrets' shape; gitleaks' is AKCp + 69
    _token("artifactory-key", r"AP[0-9A-F][A-Za-z0-9]{20,}+", _all3),  # detect-secrets wants 8+; 20+ spares "APAC2024…"
    _token("artifactory-key", r"cmVmd[A-Za-z0-9]{59}", _artifactory_ref, end=E64),
    _token("sourcegraph-token", r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}"),
    _token("readme-token", r"rdme_[a-z0-9]{70}"),
    _token("postman-key", r"PMAK-[a-fA-F0-9]{24}-[a-fA-F0-9]{34}"),
    # Cloud
    _token("aws-access-key", r"A(?:3T[A-Z0-9]|KIA|SIA|BIA|CCA|ROA|IDA|GPA|IPA|NPA|NVA|PKA)[A-Z0-9]{16}"),
    _token("google-api-key", r"AIza[A-Za-z0-9_\-]{35}"),
    _token("google-oauth-token", r"GOCSPX-[A-Za-z0-9_\-]{28}"),
    _token("google-oauth-token", r"ya29\.[A-Za-z0-9_\-]{30,}+"),
    _rule("azure-storage-key", r"AccountKey=(?P<secret>[A-Za-z0-9+/]{40,100}+={0,2})"),
    _rule("azure-storage-key", r"SharedAccessKey=(?P<secret>[A-Za-z0-9+/]{40,100}+={0,2})"),
    _rule(
        "azure-sas-signature", r"sig=(?P<secret>(?:[A-Za-z0-9+/]|%2[Bb]|%2[Ff]){30,}+(?:=|%3[Dd]){0,2})", bounded=True
    ),
    _rule(
        "azure-ad-secret",
        r"(?<![A-Za-z0-9_~.\-])(?P<secret>[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34})(?![A-Za-z0-9_~.\-])",
        ("q~",),
    ),
    _token("alibaba-key", r"LTAI[A-Za-z0-9]{20}", _digit),
    _token("digitalocean-token", r"do[opr]_v1_[a-f0-9]{64}"),
    _token("databricks-token", r"dapi[a-f0-9]{32}(?:-\d)?"),
    _token("heroku-key", r"HRKU-(?:AA[A-Za-z0-9_\-]{58}|" + UUID + ")"),
    _token("flyio-token", r"fo1_[A-Za-z0-9_\-]{43}"),
    _token("flyio-token", r"fm[12][ar]?_[A-Za-z0-9+/]{100,}+={0,3}", end=E64),
    _token("vault-token", r"hv[sbr]\.[A-Za-z0-9_\-]{24,}+", _digit),
    _token("vault-token", r"s\.[A-Za-z0-9]{24}", _all3),
    _token("terraform-token", r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_\-=]{60,70}", keywords=("atlasv1",)),
    _token("doppler-token", r"dp\.(?:pt|st|ct|sa|scim|audit)\.[A-Za-z0-9]{40,44}"),
    _token("pulumi-token", r"pul-[a-f0-9]{40}"),
    _token("planetscale-token", r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_=.\-]{32,64}"),
    _token("scalingo-token", r"tk-us-[A-Za-z0-9_\-]{48}"),
    _token("cloudflare-ca-key", r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}"),
    _token("clickhouse-key", r"4b1d[A-Za-z0-9]{38}", _all3),
    _token("defined-networking-token", r"dnkey-[A-Za-z0-9=_\-]{26}-[A-Za-z0-9=_\-]{52}"),
    _token("dynatrace-token", r"dt0c01\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{64}"),
    _token("harness-token", r"pat\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    _token("harness-token", r"sat\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9]{24}\.[A-Za-z0-9]{20}"),
    _token("infracost-token", r"ico-[A-Za-z0-9]{32}"),
    _token("openshift-token", r"sha256~[A-Za-z0-9_\-]{43}"),
    _token("octopus-key", r"API-[A-Z0-9]{26}", _digit),
    _token("prefect-token", r"pnu_[A-Za-z0-9]{36}"),
    _token("grafana-token", r"eyJrIjoi[A-Za-z0-9]{70,400}={0,3}", end=E64),
    _token("grafana-token", r"glc_[A-Za-z0-9+/]{32,400}={0,3}", end=E64),
    _token("grafana-token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}"),
    _token("sentry-token", r"sntry(?:u_[a-f0-9]{64}|s_eyJ[A-Za-z0-9+/=_]{60,}+)"),
    _token("atlassian-token", r"ATATT3[A-Za-z0-9_\-=]{150,}+"),
    _token("linear-key", r"lin_(?:api|oauth)_[A-Za-z0-9]{40}"),
    _token("notion-token", r"ntn_\d{11}[A-Za-z0-9]{35}"),
    _token("notion-token", r"secret_[A-Za-z0-9]{43}", _all3),
    _token("typeform-token", r"tfp_[A-Za-z0-9_\-.=]{59}"),
    _token(
        "authress-key",
        r"(?:sc|ext|scauth|authress)_[A-Za-z0-9]{5,30}\.[A-Za-z0-9]{4,6}\.acc[_\-][A-Za-z0-9\-]{10,32}"
        r"\.[A-Za-z0-9+/_=\-]{30,120}",
        keywords=(".acc_", ".acc-"),
    ),
    _token(
        "1password-key", r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}"
    ),
    _token("1password-key", r"ops_eyJ[A-Za-z0-9+/]{250,}+={0,3}", end=E64),
    _token("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    _token("maxmind-key", r"[A-Za-z0-9]{6}_[A-Za-z0-9]{29}_mmk", keywords=("_mmk",)),
    _token("yandex-key", r"AQVN[A-Za-z0-9_\-]{35,38}"),
    _token("yandex-key", r"t1\.[A-Za-z0-9_\-]{10,}+={0,2}\.[A-Za-z0-9_\-]{86}={0,2}"),
    _token("intra42-secret", r"s-s4t2(?:ud|af)-[a-fA-F0-9]{64}"),
    _token("frameio-token", r"fio-u-[A-Za-z0-9_\-=]{64}"),
    _token("dropbox-token", r"sl\.(?:u\.)?[A-Za-z0-9_\-=]{130,}+"),
    _token("settlemint-token", r"sm_(?:aat|pat|sat)_[A-Za-z0-9]{16}"),
    # Payments and commerce
    _token("stripe-key", r"sk_(?:live|test|prod)_[A-Za-z0-9]{10,}+", _digit),
    _token("stripe-key", r"rk_(?:live|test|prod)_[A-Za-z0-9]{10,}+", _digit),
    _token("stripe-key", r"whsec_[A-Za-z0-9]{24,}+", _digit),
    _token("square-token", r"EAAA[A-Za-z0-9_\-]{22,60}", _digit),
    _token("square-token", r"sq0(?:atp-[A-Za-z0-9_\-]{22,60}|csp-[A-Za-z0-9_\-]{43})"),
    _token("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    _token("shippo-token", r"shippo_(?:live|test)_[a-fA-F0-9]{40}"),
    _token("duffel-token", r"duffel_(?:test|live)_[A-Za-z0-9_\-=]{43}"),
    _token("easypost-token", r"EZ[AT]K[A-Za-z0-9]{54}"),
    _token("flutterwave-key", r"FLW(?:SECK|PUBK)_TEST-[a-hA-H0-9]{12,32}(?:-X)?"),
    _token("plaid-token", r"access-(?:sandbox|development|production)-" + UUID),
    _token("facebook-token", r"EAA[MC][A-Za-z0-9]{100,}+"),
    _token("facebook-token", r"\d{15,16}(?:\||%7[Cc])[0-9A-Za-z_\-]{27,40}", keywords=("|", "%7c")),
    # Mail and messaging
    _token("sendgrid-key", r"SG\.[A-Za-z0-9_\-]{16,32}\.[A-Za-z0-9_\-]{30,50}"),
    _token("sendinblue-key", r"x(?:keysib|smtpsib)-[a-f0-9]{64}-[A-Za-z0-9]{16}"),
    _token("mailchimp-key", r"[0-9a-f]{32}-us\d{1,2}", keywords=("-us",)),
    _token("twilio-key", r"SK[0-9a-fA-F]{32}", _digit),
    _token("twilio-key", r"AC[0-9a-f]{32}", _digit),
    _token("newrelic-key", r"NR(?:AK-[A-Z0-9]{27}|II-[A-Za-z0-9\-]{32}|JS-[a-f0-9]{19})"),
    _token("mapbox-token", r"pk\.(?:eyJ[A-Za-z0-9_\-]{20,}+\.[A-Za-z0-9_\-]{20,}+|[a-z0-9]{60}\.[a-z0-9]{22})"),
    _token("mapbox-token", r"sk\.eyJ[A-Za-z0-9_\-]{20,}+\.[A-Za-z0-9_\-]{20,}+"),
    _token("mapbox-token", r"tk\.eyJ[A-Za-z0-9_\-]{20,}+\.[A-Za-z0-9_\-]{20,}+"),
    _token("adobe-secret", r"p8e-[A-Za-z0-9]{32}"),
    # Generic shapes
    _token("jwt", r"eyJ[A-Za-z0-9_\-]{8,}+\.eyJ[A-Za-z0-9_\-]{8,}+\.[A-Za-z0-9_\-]{8,}+"),
    _token("jwt", r"ZXlK[A-Za-z0-9+/_\-]{40,}+={0,2}", _b64_jwt, end=E64),
    _rule("url-password", r"://[^\s:/@]{0,256}+:(?P<secret>[^\s@/]++)(?=@)"),
    _rule("bearer-token", r"Bearer\s{1,8}+(?P<secret>[A-Za-z0-9_\-.~+/]{20,}+=*)", check=_not_a_word, bounded=True),
    _rule("bearer-token", r"bearer\s{1,8}+(?P<secret>[A-Za-z0-9_\-.~+/]{20,}+=*)", check=_not_a_word, bounded=True),
    _rule("basic-auth", r"Authorization[\"']?:[ \t]*Basic[ \t]+(?P<secret>[A-Za-z0-9+/]{8,}+={0,2})", check=_basic),
    _rule("basic-auth", r"authorization[\"']?:[ \t]*[Bb]asic[ \t]+(?P<secret>[A-Za-z0-9+/]{8,}+={0,2})", check=_basic),
    _rule(
        "basic-auth", r"(?<!\S)(?:-u|--user)(?:=|[ \t]+)[\"']?[^\s:\"']{1,256}+:(?P<secret>[^\s\"']{3,}+)", ("curl",)
    ),
    _rule("assigned-secret", r"<add\s+key=[\"'](?:ClearText)?Password[\"']\s+value=[\"'](?P<secret>[^\"'\n]+)[\"']"),
    _rule(
        "kubernetes-secret",
        r"(?m)^[ \t]+[\w.\-]{1,100}+:[ \t]*[\"']?(?P<secret>[A-Za-z0-9+/]{12,}+={0,3})[\"']?[ \t]*$",
        ("kind: secret", 'kind: "secret"'),
        lambda v: len(v) % 4 == 0 and bool(_b64(v)),
    ),
    # A secret-named key with a value: the original shape (any value of 6+ characters) ...
    _keyed(
        r"\b(?i:aws_secret_access_key|secret_access_key|api[_-]?key|access[_-]?token|auth[_-]?token|client[_-]?secret"
        r"|secret[_-]?key|password|passwd)\b[\"']?\s{0,8}",
        32,
        r"[:=]\s{0,8}+[\"']?(?P<secret>[^\s\"',;]{6,256}+)",
        ("key", "token", "secret", "passw"),
        None,
    ),
    # ... any key ending in a secret word (`DB_PASSWORD`, `botToken`, `X-Api-Key`) with a random-looking value ...
    _keyed(
        _WORD_START + "(?i:" + _KEY_WORDS + ")" + _KEY_END,
        36,
        _OP + "(?P<secret>" + _VALUE + ")",
        ("pass", "pw", "secret", "token", "cred", "key"),
        looks_random,
    ),
    # ... a secret said in prose (`my password is Xk9fQ2mLp0`, `the api token was …`), random-looking; the
    # expression starts at the literal ` is ` (fast), its lookahead wants what `looks_random` does (a digit, or 16+).
    _keyed(
        _WORD_START + r"(?i:" + _KEY_WORDS + r"|passcode) {0,3}",
        40,
        r" (?:is|was) {1,4}+[\"'\x60]?(?=[^\s\"'\x60]{0,64}?\d|[^\s\"'\x60]{16})(?P<secret>" + _VALUE + ")",
        ("pass", "pw", "secret", "token", "cred", "key"),
        looks_random,
    ),
    # ... a key named in prose a few words before it (`the api key for the billing service is 7d9f…`,
    # `here's the token we use for staging: …`): a long value that looks random (`PROSE_ENTROPY`), not an id.
    # Its value starts after a blank, `:` or `=`, so no key ends inside it but an `=`-glued one (`x=token=…`,
    # the assignment rule's): the search goes on after a value without a key (`rescan=False`).
    _keyed(_PROSE_KEY, 96, _PROSE_VALUE, ("key", "token", "pass", "pw", "secret", "cred"), prose_secret, rescan=False),
    _rule(
        "assigned-secret",
        r"--?(?:password|passwd|pass|token|secret|api-key|apikey|auth-token|access-token)[ =](?P<secret>"
        + _VALUE
        + ")",
        check=looks_random,
        bounded=True,
    ),
    # ... and gitleaks' vendor-keyed rules (`TWITTER_CONSUMER = …`, `heroku: <uuid>`).
    _keyed(
        _WORD_START + "(?i:" + _VENDORS + r")[A-Za-z0-9_.\-]{0,40}" + _KEY_END,
        64,
        _OP + "(?P<secret>" + _VALUE + ")",
        (),  # checking ~80 vendor names one by one costs more than the expression itself
        _vendor_value,
    ),
)

KINDS: tuple[str, ...] = tuple(dict.fromkeys(rule.kind for rule in RULES))
