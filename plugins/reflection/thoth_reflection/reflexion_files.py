"""Reflexion record files (seed 003, tier 3): render, check, install and mark promoted.

A record is `reflexion/{date}-{slug}.md`: YAML frontmatter (date, agent, task, severity, tags, and
`error`, the normalised error it was drafted from), then `## Known Issue`, `## Root Cause`,
`## Solution`, `## Prevention`. The procedural layer reads them back on a turn that hit an error.
Reflection writes one only when a person approves a draft, and marks one `promoted` when its
guideline is approved into the persona rules.

One known issue, one record: a later failure that `matches` a record (the same normalised error,
or for a record without one, at least `MATCH_WORDS` of the error's distinctive words in its known
issue, task, tags or slug) counts in it (`seen`, `last_seen`, via `seen_again`) instead of being
drafted again, and a draft approved while a record of the same error exists is counted in that
record rather than written as a `-2` file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from thoth_core import ThothError
from thoth_core.storage import write_atomic

SECTIONS = (
    ("known_issue", "Known Issue"),
    ("root_cause", "Root Cause"),
    ("solution", "Solution"),
    ("prevention", "Prevention"),
)
NAME = re.compile(r"^[A-Za-z0-9][\w.-]{0,150}$")
SECTION = re.compile(r"^##\s+(.+?)\s*$\n(.*?)(?=^##\s|\Z)", re.MULTILINE | re.DOTALL)
MAX_GUIDELINE = 400
MAX_SIGNATURE = 160
MATCH_WORDS = 3  # distinctive words of an error a record without `error` must hold to match it
_ID = re.compile(r"\b(?=[0-9a-f-]*\d)[0-9a-f][0-9a-f-]{7,}\b")  # hex ids, uuids, digests
_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "the and for with that this from have has was were are not but you your into when then than what which while "
    "error failed failure turn could would should there their them they about after before again".split()
)


def _plain(text: Any) -> str:
    """One line, no frontmatter fence, no leading heading marks (a record's value must not end its section)."""
    return " ".join(str(text).split()).replace("---", "-").lstrip("# ").strip()


def _front(meta: dict[str, Any]) -> str:
    import strictyaml  # imported here: it costs ~30 ms, too much for `thoth --help`

    return str(strictyaml.as_document({k: _plain(v) for k, v in meta.items() if _plain(v)}).as_yaml())


def render(record: dict[str, Any], *, day: str, agent: str, error: str = "") -> str:
    """A drafted record (a `ReflexionRecord` as a dict) as the markdown file text; `error` is the failure's
    text (redacted), kept normalised so that a later failure like it is counted here (`signature`)."""
    meta = {
        "date": day,
        "agent": agent,
        "task": record.get("task", ""),
        "severity": record.get("severity", ""),
        "tags": " ".join(record.get("tags") or []),
        "error": signature(error) if error else "",
    }
    body = "\n\n".join(f"## {title}\n{_plain(record.get(key, ''))}" for key, title in SECTIONS)
    return f"---\n{_front(meta)}---\n\n{body}\n"


def signature(error: str) -> str:
    """An error as records compare it: case folded, ids and numbers as 0, one line, at most MAX_SIGNATURE chars."""
    text = _ID.sub("0", " ".join(error.casefold().split()))
    return re.sub(r"\d+", "0", text)[:MAX_SIGNATURE].strip()


def words(text: str) -> set[str]:
    """The distinctive words of a text (3+ characters, no stopwords), as the procedural layer matches them."""
    return {w for w in _WORD.findall(text.casefold()) if len(w) >= 3 and w not in STOPWORDS}


def matches(meta: dict[str, Any], sections: dict[str, str], name: str, error: str) -> int:
    """How well a record matches an error: 2 the same normalised error, 1 enough shared words, 0 no match."""
    if meta.get("error"):
        return 2 if str(meta["error"]) == signature(error) else 0
    wanted = words(error)
    keywords = words(" ".join([sections.get("Known Issue", ""), str(meta.get("task", "")), str(meta.get("tags", ""))]))
    keywords |= words(re.sub(r"^\d{4}-\d{2}-\d{2}-?", "", name.removesuffix(".md")))
    shared = len(wanted & keywords)
    return 1 if wanted and shared >= min(MATCH_WORDS, len(wanted)) else 0


def find_known(folder: Path, error: str) -> Path | None:
    """The record in folder this error is a repeat of (the same normalised error first), or None."""
    best: tuple[int, str, Path] | None = None
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            meta, sections = parse(path.read_text(encoding="utf-8"), source=str(path))
        except (OSError, UnicodeDecodeError, ThothError):
            continue  # the procedural layer names malformed records when it loads them
        score = matches(meta, sections, path.name, error)
        if score and (best is None or score > best[0]):
            best = (score, path.name, path)
    return best[2] if best else None


def counted(text: str, *, day: str, times: int = 1) -> str:
    """A record's text with `times` more sightings (`seen`, counting the first) and `last_seen` = day."""
    meta, _ = parse(text, source="record")
    body = text.split("---", 2)[2]
    seen = _count(meta.get("seen")) + times
    return f"---\n{_front({**meta, 'seen': str(seen), 'last_seen': day})}---{body}"


def _count(value: Any) -> int:
    """A record's `seen` (1 when absent or not a number: the failure it was drafted from)."""
    try:
        return max(1, int(str(value)))
    except ValueError:
        return 1


def seen_again(path: Path, *, day: str, times: int = 1) -> int:
    """Count another failure in a record file; returns how often it has been seen now."""
    try:
        text = counted(path.read_text(encoding="utf-8"), day=day, times=times)
        write_atomic(path, text)
    except OSError as exc:
        raise ThothError(f"{path}: cannot count the failure in the reflexion record: {exc}") from exc
    return _count(parse(text, source=str(path))[0].get("seen"))


def file_name(day: str, slug: str) -> str:
    """The seed's file name: `{date}-{slug}.md`."""
    return f"{day}-{slug}.md"


def parse(text: str, *, source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(frontmatter, sections) of a record; ThothError naming source when it is malformed."""
    parts = text.split("---", 2)
    if not text.startswith("---") or len(parts) < 3:
        raise ThothError(f"{source}: a reflexion record starts with '---' YAML frontmatter closed by '---'")
    import strictyaml

    try:
        meta = strictyaml.load(parts[1]).data if parts[1].strip() else {}
    except strictyaml.YAMLError as exc:
        raise ThothError(f"{source}: malformed frontmatter: {' '.join(str(exc).split())}") from exc
    if not isinstance(meta, dict):
        raise ThothError(f"{source}: malformed frontmatter: expected keys and values")
    sections = {m.group(1).strip().title(): " ".join(m.group(2).split()) for m in SECTION.finditer(parts[2])}
    if not sections.get("Known Issue"):
        raise ThothError(f"{source}: a reflexion record needs a non-empty '## Known Issue' section")
    return meta, sections


def locate(folder: Path, record: str) -> Path | None:
    """The record file named `record` (with or without `.md`) in folder, or None."""
    name = record if record.endswith(".md") else f"{record}.md"
    if not NAME.match(name) or "/" in name:
        return None
    path = folder / name
    return path if path.is_file() and not path.is_symlink() else None


def install(folder: Path, name: str, text: str, *, day: str = "") -> Path:
    """Write an approved record as a new file (`-2`, `-3`, ... when another text has the name); returns its path.

    A record of an error that a record in folder already has (the same `error`) is counted there
    instead (`seen_again`, by the draft's own `seen`), so one known issue keeps one record."""
    if not NAME.match(name) or not name.endswith(".md"):
        raise ThothError(f"reflexion record name {name!r} is not a plain file name ending in .md")
    meta, _ = parse(text, source=name)
    if meta.get("error") and (known := _same_error(folder, str(meta["error"]), text)) is not None:
        seen_again(
            known, day=day or str(meta.get("last_seen") or meta.get("date") or ""), times=_count(meta.get("seen"))
        )
        return known
    stem = name.removesuffix(".md")
    path, n, body = folder / name, 1, text.rstrip("\n") + "\n"
    while path.exists():
        if path.read_text(encoding="utf-8") == body:  # written by an apply a killed worker began
            return path
        n += 1
        path = folder / f"{stem}-{n}.md"
    try:
        write_atomic(path, body)
    except OSError as exc:
        raise ThothError(f"{path}: cannot write the reflexion record: {exc}") from exc
    return path


def _same_error(folder: Path, error: str, text: str) -> Path | None:
    """The record in folder kept for this normalised error, unless it is this very text (an apply done again)."""
    body = text.rstrip("\n") + "\n"
    same: list[Path] = []
    for path in sorted(folder.glob("*.md")) if folder.is_dir() else []:
        try:
            found = path.read_text(encoding="utf-8")
            meta, _ = parse(found, source=str(path))
        except (OSError, UnicodeDecodeError, ThothError):
            continue
        if found == body:
            return None
        if str(meta.get("error") or "") == error:
            same.append(path)
    return same[0] if same else None


def guideline_of(path: Path) -> str:
    """The guideline a record promotes to: when its known issue happens, its prevention (else solution)."""
    meta, sections = parse(path.read_text(encoding="utf-8"), source=str(path))
    issue = sections["Known Issue"].split(". ")[0].rstrip(".")
    advice = sections.get("Prevention") or sections.get("Solution") or ""
    if not advice:
        raise ThothError(f"{path}: the record has no Prevention or Solution to promote; pass --text")
    text = f"When {issue[:1].lower()}{issue[1:]}: {advice}"
    return text if len(text) <= MAX_GUIDELINE else text[: MAX_GUIDELINE - 3] + "..."


def mark_promoted(path: Path, *, day: str, to: str, actor: str) -> None:
    """Add `promoted`, `promoted_to` and `promoted_by` to a record's frontmatter (the body is kept)."""
    text = path.read_text(encoding="utf-8")
    meta, _ = parse(text, source=str(path))
    body = text.split("---", 2)[2]
    meta = {**meta, "promoted": day, "promoted_to": to, "promoted_by": actor}
    try:
        write_atomic(path, f"---\n{_front(meta)}---{body}")
    except OSError as exc:
        raise ThothError(f"{path}: cannot mark the record promoted: {exc}") from exc
