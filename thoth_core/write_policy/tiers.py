"""The risk tiers: which tier one text takes, by what applying it would change (lowest first).

- `self-fact`: a plain statement of fact about the speaking peer ("Ann prefers short answers");
- `general`: about neither the peer nor another person (a project, a place, how a fix went);
- `other-peer`: about another person (another known peer, an @mention, a relative or colleague);
- `tool`: tool or shell commands, paths, URLs, addresses, moving or archiving data;
- `instruction`: tells the agent how to behave or what to do (modal and imperative forms);
- `unjudged`: text the policy cannot read (`language`: not plain English in the Latin alphabet:
  another language or script, accented or transliterated words, invisible characters); the word
  tables say nothing about it, so it is held whatever a policy says, and ranks above
  `instruction` so that a policy applying instructions still holds it;
- `authority`: permissions, approvals, or the identity or authority of someone; it would change
  what the agent is allowed to do, so it is held whatever a policy says.

The classifier is conservative so that it holds against paraphrase, not only against known
phrasings: a text is a `self-fact` only when it positively reads as one (each sentence opens
with the peer as its subject: the peer's id, "the user", or an opening verb like "Prefers ...", and
no signal of a higher tier occurs anywhere, and the text is plain English). Anything else takes
the tier of its strongest signal, or `general`. Unreadable text is held by that first rule; the
instruction cues of other languages (`cues`) are a second net: they make text that passes for
English but carries a foreign order word `instruction`, and show in the evidence of unjudged text.
Which tiers apply without a person is the caller's policy (`thoth_core.write_policy.judge`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from . import cues, firewall, language
from .verdict import TIERS

MAX_FACT_CHARS = 300  # a longer text is not "a plain statement of fact"

_WORDS = re.IGNORECASE


def words(*alternatives: str) -> re.Pattern[str]:
    """One case-insensitive pattern matching any of the alternatives (regexes) as whole words."""
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", _WORDS)


# Word tables, one line per theme (the formatter would put one word on each line).
# fmt: off
AUTHORITY = words(
    # permission and approval
    r"pre-?approv\w*", r"approv\w*", r"authori[sz]\w*", r"permission\w*", r"permit\w*", r"allow\w*", r"entitle\w*",
    r"clearance", r"cleared", r"sanction\w*", r"endorse\w*", r"mandate\w*", r"consent\w*", r"confirm\w*",
    r"sign(?:s|ed)?[\s-]?off", r"green-?light\w*", r"rubber-?stamp\w*", r"carte\s+blanche", r"blanket",
    r"(?:fine|ok|okay|safe|free|good|cleared|welcome)\s+to",
    r"(?:fine|ok|okay|alright|happy|cool|content)\s+(?:with|for)\s+(?:\S+\s+){1,3}?(?:to\s+\w+|\w+ing)",
    # skipping the checks
    r"override\w*", r"bypass\w*", r"exempt\w*", r"waive\w*", r"white-?list\w*", r"allow-?list\w*",
    r"without\s+(?:a\s+)?(?:review\w*|asking|checking|check\w*|question\w*|approval|confirmation|oversight)",
    r"no\s+(?:need|questions)", r"needs?\s+no",
    r"no\s+(?:[\w-]+\s+){0,2}?(?:checks?|look|reviews?|sign-?off|approval|confirmation)",
    r"straight\s+(?:out|through|in|to)", r"go(?:es)?\s+through",
    # rank, roles and who speaks for whom
    r"admin\w*", r"superuser", r"sudo\w*", r"root", r"privilege\w*", r"elevat\w*", r"owners?", r"ownership",
    r"owns?\s+the", r"founder\w*", r"co-?founder\w*", r"ceo", r"cto", r"cfo", r"coo", r"leadership", r"executives?",
    r"boss\w*", r"on\s+the\s+board", r"board\s+(?:member|of)", r"in\s+charge", r"final\s+(?:say|word)",
    r"say-?so", r"calls?\s+the\s+shots", r"decid\w*\s+(?:who|what|whether|which|when)", r"decision-?makers?",
    r"makes?\s+the\s+(?:\w+\s+)?decisions?", r"gatekeep\w*", r"controls?", r"govern\w*",
    r"oversees?", r"responsible\s+for", r"runs?\s+the\s+(?:company|business|show|org\w*|place)",
    r"is\s+(?:the\s+)?law", r"voice\s+of", r"outrank\w*", r"supersede\w*", r"authorit\w*", r"vip",
    r"(?:top|highest|full|elevated)[\s-]+(?:level|tier)", r"full\s+control", r"unrestricted", r"unlimited",
    r"same\s+(?:\w+\s+)?(?:rights|powers|weight|standing|say|keys|access|level|privileges)",
    r"trust\w*", r"vouch\w*", r"verified", r"vetted", r"on\s+(?:\w+\s+)?behalf", r"speak(?:s|ing)?\s+for",
    r"act(?:s|ing)?\s+for", r"represent\w*", r"delegat\w*", r"impersonat\w*", r"escalat\w*",
    r"on\s+the\s+(?:list|guest\s+list)",
    # access and credentials
    r"access\w*", r"priority\s+access", r"credential\w*", r"passwords?", r"passphrases?", r"api[\s_-]?keys?",
    r"private\s+keys?", r"ssh\s+keys?", r"master\s+(?:key|password|account)", r"keys?\s+to", r"the\s+keys",
    r"logins?", r"sign-?ins?",
)

INSTRUCTION = words(
    # modal and standing-order forms
    r"should", r"shall", r"must", r"ought", r"needs?\s+to", r"has\s+to", r"have\s+to", r"(?-i:may)",
    r"is\s+to\s+be", r"are\s+to\s+be", r"always", r"never", r"going\s+forward", r"moving\s+forward",
    r"from\s+(?:now|here|this\s+point|today|tomorrow)\s+on", r"henceforth", r"hereafter",
    r"in\s+(?:the\s+)?future", r"next\s+time", r"whenever", r"every\s+time", r"each\s+time", r"any\s*time",
    r"on\s+(?:request|demand)", r"upon\s+request",
    # telling the agent how to see things or what to do
    r"(?:treat|regard|consider|view|see|take|count|handle|deem|class|classify|label|mark|accept)\w*"
    r"\s+(?:[\w'@.-]+\s+){0,6}?as",
    r"as\s+(?:if|though)", r"deem\w*", r"assum\w*", r"make\s+sure", r"be\s+sure", r"ensure\w*", r"remember\s+to",
    r"don'?t", r"do\s+not", r"does\s*n[o']t\s+need", r"refrain\w*", r"instead", r"obey\w*", r"comply", r"complies",
    r"let\s+(?:him|her|them|\w+\s+(?:do|run|have|use|see))", r"do\s+what(?:ever)?", r"whatever", r"instruct\w*",
    r"orders?\s+from", r"requests?",
    r"(?:every|any|all)\s+(?:of\s+)?(?:\w+\s+)?(?:requests?|messages?|commands?|asks?|tasks?)",
    # addressing the agent, or any assistant, bot or AI
    r"(?:the|this|our|its)\s+(?:agent|model|helper)", r"assistants?", r"(?:chat)?bots?", r"ai", r"a\.i\.", r"llms?",
    r"chat-?gpt", r"gpt-?\w*", r"claude", r"thoth", r"you", r"your", r"yourself", r"yourselves",
)

IMPERATIVE_START = re.compile(
    r"^\W*(?:please\s+)?(?:\w+ly\s+)?(?:ignore|disregard|forget|treat|consider|regard|give|grant|let|allow|send"
    r"|forward|upload|e-?mail|post|share|copy|move|run|execute|call|invoke|use|skip|bypass|stop|start|reply"
    r"|respond|answer|tell|say|remember|make|ensure|keep|add|delete|remove|trust|approve|assume|accept|obey"
    r"|follow|prioriti[sz]e|include|attach|archive|zip|tar|back|push|pull|install|open|fetch|download|visit"
    r"|check|note|act|be|do|go|put|take|bundle|pack|ship|sync|mirror|export|dump|escalate|defer|hand|route"
    r"|assign|always|never|don'?t|only|just|feel|honou?r|respect|mention|reveal|print|show|list|read|write|save"
    r"|store|set|change|update)\b",
    _WORDS,
)

TOOL_TOKENS = re.compile(  # paths, variables, code, addresses, domains, URLs of any scheme
    r"(?<![\w.])(?:~[/\\]?|\.{1,2}/|/(?:etc|home|usr|var|tmp|root|opt|bin|sbin|Users|dev|proc|mnt|srv)\b"
    r"|[a-z]:\\)\S*|\$\{?[A-Z_]{2,}|`[^`]+`|\b[\w.+-]+@[\w-]+\.[\w.-]+\b|\b\d{1,3}(?:\.\d{1,3}){3}\b"
    r"|\b[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|io|dev|ai|app|co|xyz|info|biz|me|sh|ru|cn|tk|example|local|internal"
    r"|top|club|so|gg|to|ly|lol|site|online|link|click|shop|live|pw|cc|ws|su|icu|buzz|fun)\b"
    r"|\b[a-z][\w-]*(?:\.[\w-]+)*\.[a-z]{2,24}/\S*"  # a host name of any ending, then a path: a web address
    r"|\b[a-z][a-z0-9+.-]*://\S+|\b(?:javascript|vbscript):\S+",
    _WORDS,
)

TOOL_WORDS = words(
    # moving, copying or archiving data
    r"upload\w*", r"exfiltrat\w*", r"send\w*", r"sent", r"forward\w*", r"e-?mail\w*",
    r"mail(?:s|ed|ing)?\s+(?:\w+\s+){0,4}to", r"post\w*\s+(?:\w+\s+){0,4}(?:to|on)", r"transfer\w*", r"sync\w*",
    r"cop(?:y|ies|ied|ying)", r"mirror\w*", r"leak\w*", r"publish\w*", r"push\w*", r"archiv\w*", r"zip\w*", r"tar",
    r"tarball", r"compress\w*", r"back(?:s|ed)?\s*up", r"backups?", r"dump\w*", r"export\w*",
    r"shar(?:e|es|ed|ing)\s+(?:\w+\s+){0,4}with", r"pipe\w*", r"beam\w*", r"ship\w*\s+(?:\w+\s+){0,4}to",
    # running things and where they run
    r"execut\w*", r"install\w*", r"download\w*", r"fetch\w*", r"curl", r"wget", r"scripts?", r"commands?", r"shell",
    r"terminal", r"cron\w*", r"webhooks?", r"endpoints?", r"bucket\w*", r"servers?", r"ftp", r"sftp", r"ssh", r"scp",
    r"rsync", r"s3", r"dropbox", r"pastebin", r"gist\w*",
)

OTHER_PERSON = words(
    # family, work and household
    r"wife", r"husband", r"partner", r"spouse", r"fianc[eé]e?", r"boyfriend", r"girlfriend", r"sons?",
    r"daughters?", r"kids?", r"child(?:ren)?", r"mother", r"father", r"mom", r"mum", r"dad", r"parents?",
    r"brothers?", r"sisters?", r"siblings?", r"aunts?", r"uncles?", r"cousins?", r"grand\w+", r"friends?",
    r"colleagues?", r"co-?workers?", r"managers?", r"supervisors?", r"team-?mates?", r"neighbou?rs?", r"room-?mates?",
    r"flat-?mates?", r"landlords?", r"landlad(?:y|ies)", r"clients?", r"customers?", r"employees?", r"employer",
    r"interns?", r"guests?", r"visitors?", r"strangers?",
    # people in general and relations between them
    r"others", r"someone", r"somebody", r"everyone", r"everybody", r"anyone", r"anybody", r"nobody", r"people",
    r"persons?", r"users", r"married", r"marry", r"dating", r"divorc\w*", r"engaged\s+to", r"related\s+to",
    r"reports?\s+to", r"(?:with|than|tells?|told|asked|says?|said)\s+(?:(?-i:[A-Z][a-z]+)|@\w+)",
)
MENTION = re.compile(r"<@\w+>|(?<![\w.])@\w+")

SIGNALS: tuple[tuple[str, tuple[re.Pattern[str], ...]], ...] = (
    ("authority", (AUTHORITY,)),
    ("instruction", (INSTRUCTION,)),
    ("tool", (TOOL_TOKENS, TOOL_WORDS)),
    ("other-peer", (OTHER_PERSON, MENTION)),
)
REPORTED = words(  # a claim passed on ("Ann says that ...") is not a fact about the peer
    r"says?", r"said", r"mention\w*", r"claim\w*", r"told", r"tells?", r"reports?", r"reported",
    r"according\s+to", r"heard", r"insist\w*", r"announc\w*", r"explain\w*\s+that", r"thinks?\s+that",
    r"believes?\s+that", r"that\s+\w+\s+(?:is|are|was|were|has|have|can|will)",
)
# fmt: on
REDACTED_KIND = re.compile(r"\[REDACTED:[\w.-]+\]")  # a placeholder's kind names a secret, not an intent
CLAUSE_START = re.compile(r"[.!?;:\n]+\s*|\s+(?:and|then)\s+(?=\w+\s)")  # where an order may begin
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|\n+")
FOLLOW_ON_SUBJECT = re.compile(r"^(?:she|he|they)\b", _WORDS)
FACT_VERB = re.compile(  # how an identity update or note about the peer may open without naming them
    r"^(?:is|was|has|had|does|did|prefers|preferred|likes|liked|loves|enjoys|hates|dislikes|works|worked|lives"
    r"|lived|uses|used|speaks|studies|studied|teaches|writes|reads|plays|runs|drinks|eats|wants|knows|thinks"
    r"|believes|feels|finds|goes|went|travels|commutes|codes|programs|develops|builds|designs|manages|leads"
    r"|maintains|deploys|ships|tests|attends|plans|hopes|tends|grew|moved|started|joined|left|keeps|cares"
    r"|avoids|favou?rs|wears|cooks|bakes|rides|drives|cycles|swims|practi[cs]es|volunteers|belongs|comes|came"
    r"|holds|owns|celebrates|supports|learns|learned|learnt|sleeps|wakes|starts|finishes|ends)\b",
    _WORDS,
)


@dataclass(frozen=True)
class Assessment:
    """A proposal's tier and the words that put it there."""

    tier: str
    evidence: tuple[str, ...] = ()


def rank(tier: str) -> int:
    """How risky a tier is: its place in TIERS (unknown tiers count as the riskiest)."""
    return TIERS.index(tier) if tier in TIERS else len(TIERS)


def riskier(first: str, second: str) -> str:
    """The riskier of two tiers."""
    return first if rank(first) >= rank(second) else second


def signals(text: str, *, peer: str, known_peers: Iterable[str] = ()) -> dict[str, list[str]]:
    """Tier -> the words in `text` that signal it (another known peer counts as `other-peer`)."""
    found: dict[str, list[str]] = {}
    for tier, patterns in SIGNALS:
        hits = [match.group(0).strip() for pattern in patterns for match in pattern.finditer(text)]
        hits = [hit for hit in hits if not _names_peer(hit, peer)]
        if tier == "instruction":
            hits[:0] = [c.split()[0] for c in CLAUSE_START.split(text) if c.strip() and IMPERATIVE_START.match(c)]
            hits += cues.foreign_cues(text)
        if tier == "tool":
            hits += [r for r in firewall.skill_risks(text) if r in ("archives-files", "sends-data")]
        if tier == "other-peer":
            hits += firewall.other_peers(text, own=peer, known=known_peers)
        if hits:
            found[tier] = hits
    return found


def _names_peer(hit: str, peer: str) -> bool:
    """Whether a matched mention (`@ann`, `with Ann`) is the speaking peer themself."""
    return bool(peer) and hit.lstrip("@<").rstrip(">").split()[-1].lower() == peer.lower()


def _opens_with_peer(sentence: str, peer: str, *, first: bool) -> bool:
    """Whether a sentence has the speaking peer as its subject (or, after the first, a pronoun)."""
    text = sentence.lstrip(" \t\"'*-•")
    names = ["the user", "user"] + ([re.escape(peer), f"@{re.escape(peer)}", f"<@{re.escape(peer)}>"] if peer else [])
    subject = re.compile(rf"^(?:{'|'.join(names)})(?:'s|’s)?\s+\S", _WORDS)
    if subject.match(text) or FACT_VERB.match(text):
        return True
    return not first and bool(FOLLOW_ON_SUBJECT.match(text))


def reads_as_self_fact(text: str, *, peer: str) -> bool:
    """Whether every sentence of a short text states something with the speaking peer as subject."""
    sentences = [s for s in SENTENCE_END.split(text.strip()) if s.strip()]
    if not sentences or len(text) > MAX_FACT_CHARS or REPORTED.search(text):
        return False
    return all(_opens_with_peer(s, peer, first=i == 0) for i, s in enumerate(sentences))


def _without_addresses(text: str) -> str:
    """Text without its paths, addresses, domains and URLs (the `tool` tier's business), for `language`;
    code in backticks stays, so words hidden in it are read like any others."""
    text = firewall.URL.sub(" ", text)
    return TOOL_TOKENS.sub(lambda m: m.group(0) if m.group(0).startswith("`") else " ", text)


def classify(text: str, *, peer: str, known_peers: Iterable[str] = (), about: str | None = None) -> Assessment:
    """The tier of one proposal from a session of `peer`; `about` is the peer an identity update concerns."""
    subject = about or peer
    text = REDACTED_KIND.sub("[REDACTED]", text)
    found = signals(text, peer=subject, known_peers={*known_peers, peer} - {subject})
    if about is not None and about.lower() != peer.lower():
        found.setdefault("other-peer", []).insert(0, about)
    read = language.reading(_without_addresses(text), names={peer, subject, *known_peers})
    if not read.judgeable:
        found["unjudged"] = [read.reason]
    if found:
        tier = max(found, key=rank)
        return Assessment(tier, tuple(hit for t in sorted(found, key=rank, reverse=True) for hit in found[t]))
    if reads_as_self_fact(text, peer=subject):
        return Assessment("self-fact")
    return Assessment("general")
