"""The firewall's text checks: injection phrasing, tool commands, URLs, and what a skill's text would do.

Text someone could have shaped (a transcript, a model's summary of it, a memory server's answer) is
checked for prompt-injection phrasing (in English, and a request to set rules or instructions aside
in any language `cues` knows), tool or shell commands and URLs to fetch (`check_text`). `skill_risks`
names what a text would do that a reviewer must see (archive files, send data away, touch
credentials, fetch things); `mentions` and `other_peers` find the peers a text talks about.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from . import cues

INJECTION = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|skip)\b(?:\s+\w+){0,3}?\s+"
    r"(?:previous|prior|above|earlier|all|any|your|the|system|safety|existing)\s+"
    r"(?:\w+\s+)?(?:instructions?|prompts?|rules|guidelines|directives|messages|context|polic(?:y|ies))\b"
    r"|\byou\s+(?:are|will)\s+now\b|\bfrom\s+now\s+on\s*,?\s*you\b|\bnew\s+(?:system\s+)?instructions?\b"
    r"|\bsystem\s+prompt\b|\bjailbreak|\bdeveloper\s+mode\b|\bdo\s+anything\s+now\b|\bpretend\s+(?:to\s+be|you\s+are)\b"
    r"|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|different|admin|root|system)\b"
    r"|\breveal\s+(?:your|the)\s+(?:system|hidden|secret)\b|\bexfiltrat"
    r"|<\s*/?\s*(?:system|instructions?|tool_use|function_calls?|invoke)\b|\[/?INST\]|^\s*#{2,}\s*(?:system|instruction)",
    re.IGNORECASE | re.MULTILINE,
)

TOOL_COMMAND = re.compile(
    r"\b(?:rm\s+-[rf]+|sudo\s+\S|chmod\s+[0-7+]|chown\s+\S|curl\s+\S|wget\s+\S|scp\s+\S|ssh\s+\S+@|nc\s+-[elp]"
    r"|bash\s+-c|sh\s+-c|powershell|cmd\.exe|mkfs|dd\s+if=|eval\s*\(|exec\s*\(|os\.system|subprocess\.|__import__"
    r"|git\s+push\s+(?:-f|--force)|pip\s+install\s+\S|npm\s+install\s+\S|crontab\s+-)"
    r"|\$\([^)]*\)|`[^`\n]*(?:rm|curl|wget|sudo|bash|sh|python|nc)\b[^`\n]*`|\|\s*(?:ba)?sh\b"
    r"|\b(?:run|execute|call|invoke|use)\s+the\s+(?:\w+\s+)?(?:tool|command|function|shell)\b",
    re.IGNORECASE,
)

ARCHIVES_FILES = re.compile(  # bundling files up: an archive verb near a folder, the home directory or "everything"
    r"\b(?:tar|zip|7z|gzip|bzip2|xz|archiv\w*|compress\w*|bundl\w*|pack(?:s|ed|ing|age)?|back(?:s|ed)?\s*up|backup"
    r"|snapshot\w*|dump\w*|cop(?:y|ies|ied|ying)|cp\s+-\w*r|gather\w*|collect\w*)\b(?:\W+\w+){0,8}?\W+"
    r"(?:~|\$\{?HOME\b|/home\b|/Users\b|home\b|folders?\b|director(?:y|ies)\b|documents\b|files\b|disk\b"
    r"|everything\b|drive\b|profile\b|desktop\b)",
    re.IGNORECASE,
)

SENDS_DATA = re.compile(  # data leaving the machine: a transfer command, or a move verb near a remote destination
    r"\b(?:scp|rsync|rclone|sftp|ftp|ncat|netcat|nc|sendmail|smbclient|gsutil|azcopy|aws\s+s3\s+(?:cp|sync|mv)"
    r"|curl\b[^\n]*?\s(?:-T|--upload-file|-F|--form|-d|--data(?:-binary)?)\b|wget\b[^\n]*--post"
    r"|mail\s+-s|exfiltrat\w*)"
    r"|\b(?:upload\w*|send\w*|sent|post\w*|push\w*|transfer\w*|sync\w*|shar(?:e|es|ed|ing)|put\w*|plac\w*"
    r"|drop\w*|cop(?:y|ies|ied|ying)|mov(?:e|es|ed|ing)|mirror\w*|forward\w*|e-?mail\w*|mail\w*|leak\w*"
    r"|publish\w*|beam\w*|ship\w*|stash\w*|stor(?:e|es|ed|ing)|park\w*)\b(?:\W+\w+){0,8}?\W+"
    r"(?:buckets?|servers?|hosts?|remote\w*|cloud|drives?|storage|endpoints?|webhooks?|urls?|inbox\w*|dropbox"
    r"|s3|gist\w*|pastebin|ftp|sftp|network|share|addresses|address|site|api|[\w.+-]+@[\w-]+\.\w+"
    r"|(?:https?|ftp|s3|gs)://)",
    re.IGNORECASE,
)

TOUCHES_CREDENTIALS = re.compile(
    r"~?/?\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/|\.netrc\b|\.pgpass\b|(?<![\w.])\.env\b|\.kube/config"
    r"|\.docker/config|\.git-credentials|\.npmrc|\.pypirc|\.gnupg|\bkeychain\b|\bkeyring\b|\bcredential\w*"
    r"|\bpasswords?\b|\bpasswd\b|/etc/shadow|\btokens?\b|\bsecrets?\b|\bapi[\s_-]?keys?\b|\bprivate\s+keys?\b"
    r"|\.pem\b|\bcookies?\b|\bwallet\b",
    re.IGNORECASE,
)

FETCHES = re.compile(r"\b(?:download\w*|fetch\w*|pull\w*\s+(?:\w+\s+){0,3}from)\b", re.IGNORECASE)

URL = re.compile(
    r"\b(?:https?|ftp|file|data|javascript)://\S+|\bwww\.[a-z0-9\-]+\.[a-z]{2,}\S*|\bdata:[a-z]+/[a-z0-9.+\-]+;base64,"
    r"|\b(?:javascript|vbscript):\S+",  # a script link (`[click](javascript:...)`)
    re.IGNORECASE,
)


def check_text(text: str) -> list[str]:
    """The firewall flags one piece of text raises (`injection`, `tool-command`, `url`)."""
    flags = []
    if INJECTION.search(text) or cues.sets_rules_aside(text):
        flags.append("injection")
    if TOOL_COMMAND.search(text):
        flags.append("tool-command")
    if URL.search(text):
        flags.append("url")
    return flags


def skill_risks(text: str) -> list[str]:
    """What a skill's text would do that a reviewer must see: `archives-files`, `sends-data`,
    `touches-credentials`, `fetches` (on top of `check_text`'s flags)."""
    checks = (
        ("archives-files", ARCHIVES_FILES),
        ("sends-data", SENDS_DATA),
        ("touches-credentials", TOUCHES_CREDENTIALS),
        ("fetches", FETCHES),
    )
    return [flag for flag, pattern in checks if pattern.search(text)]


def mentions(text: str, names: Iterable[str]) -> list[str]:
    """The names (peers) a text mentions as whole words, or as `@name` / `<@name>`."""
    found = []
    for name in sorted({n for n in names if n and len(n) >= 2}):
        if re.search(
            rf"(?<![\w@]){re.escape(name)}(?!\w)|@{re.escape(name)}\b|<@{re.escape(name)}>", text, re.IGNORECASE
        ):
            found.append(name)
    return found


def other_peers(text: str, *, own: str, known: Iterable[str]) -> list[str]:
    """Known peers other than the session's own that a text talks about."""
    return [name for name in mentions(text, known) if name.lower() != own.lower()]
