"""The reflection output schema: parse the model's JSON and validate it field by field.

`validate` returns the normalised result (missing optional fields filled in) or raises
`InvalidOutput` listing every problem, which becomes the repair prompt. Sizes are capped so
a runaway or hostile model cannot flood persona files; a skill name must be a plain slug.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

MAX_OUTPUT_CHARS = 100_000
MAX_ITEMS = 20
MAX_TEXT = 1_000
MAX_PEERS = 20
MAX_DESCRIPTION = 1_024
MAX_BODY = 20_000
MAX_CHECK_IN_DAYS = 366
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PEER = re.compile(r"^[^\s/\\<>`]{1,100}$")
LIST_FIELDS = ("what_worked", "what_didnt", "memory_notes", "persona_observations")

SCHEMA_TEXT = """{
  "what_worked": ["short lesson", ...],
  "what_didnt": ["short lesson", ...],
  "skill": {"name": "lowercase-slug", "description": "when to use it", "body": "markdown steps"} or null,
  "memory_notes": ["durable fact worth remembering", ...],
  "persona_observations": ["observation about how the agent itself should behave", ...],
  "next_check_at": "ISO-8601 time to check back on this thread" or null,
  "user_model_updates": {"<peer>": ["what we learned about this person", ...]}
}"""


class InvalidOutput(ValueError):
    """The model's output is not a valid reflection; `problems` lists why."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def parse(text: str) -> Any:
    """The JSON value in a model reply (code fences and surrounding prose tolerated)."""
    if len(text) > MAX_OUTPUT_CHARS:
        raise InvalidOutput([f"output is {len(text)} characters, more than {MAX_OUTPUT_CHARS}"])
    stripped = re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", text.strip())
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        start, end = stripped.find("{"), stripped.rfind("}")
        if 0 <= start < end:
            try:
                return json.loads(stripped[start : end + 1])
            except json.JSONDecodeError:
                pass
        raise InvalidOutput([f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]) from exc


def validate(value: Any, *, now: float) -> dict[str, Any]:
    """The normalised reflection from parsed JSON; raises InvalidOutput with every problem."""
    if not isinstance(value, dict):
        raise InvalidOutput([f"expected a JSON object, got {type(value).__name__}"])
    problems: list[str] = []
    result: dict[str, Any] = {}
    for field in LIST_FIELDS:
        result[field] = _texts(value.get(field, []), field, problems)
    result["skill"] = _skill(value.get("skill"), problems)
    result["next_check_at"] = _check_at(value.get("next_check_at"), now, problems)
    result["user_model_updates"] = _updates(value.get("user_model_updates", {}), problems)
    if problems:
        raise InvalidOutput(problems)
    return result


def _texts(value: Any, field: str, problems: list[str], limit: int = MAX_TEXT) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(f"{field}: expected a list of strings, got {type(value).__name__}")
        return []
    if len(value) > MAX_ITEMS:
        problems.append(f"{field}: {len(value)} items, at most {MAX_ITEMS}")
    texts = []
    for index, item in enumerate(value[:MAX_ITEMS]):
        if not isinstance(item, str):
            problems.append(f"{field}[{index}]: expected a string, got {type(item).__name__}")
        elif len(item) > limit:
            problems.append(f"{field}[{index}]: {len(item)} characters, at most {limit}")
        elif item.strip():
            texts.append(item.strip())
    return texts


def _skill(value: Any, problems: list[str]) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(f"skill: expected an object or null, got {type(value).__name__}")
        return None
    limits = {"name": 64, "description": MAX_DESCRIPTION, "body": MAX_BODY}
    skill = {}
    for key, limit in limits.items():
        part = value.get(key)
        if not isinstance(part, str) or not part.strip():
            problems.append(f"skill.{key}: expected a non-empty string")
        elif len(part) > limit:
            problems.append(f"skill.{key}: {len(part)} characters, at most {limit}")
        else:
            skill[key] = part.strip()
    name = skill.get("name")
    if name is not None and not SLUG.match(name):
        problems.append(f"skill.name: {name[:80]!r} is not a slug (lowercase letters, digits, single hyphens)")
    return skill if len(skill) == 3 and SLUG.match(skill["name"]) else None


def _check_at(value: Any, now: float, problems: list[str]) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        problems.append(f"next_check_at: expected an ISO-8601 string or null, got {type(value).__name__}")
        return None
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        problems.append(f"next_check_at: {value[:60]!r} is not an ISO-8601 time")
        return None
    when = when if when.tzinfo else when.replace(tzinfo=UTC)
    if when.timestamp() > now + MAX_CHECK_IN_DAYS * 86400:
        problems.append(f"next_check_at: {value[:60]!r} is more than {MAX_CHECK_IN_DAYS} days away")
        return None
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _updates(value: Any, problems: list[str]) -> dict[str, list[str]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.append(
            f"user_model_updates: expected an object of peer -> list of strings, got {type(value).__name__}"
        )
        return {}
    if len(value) > MAX_PEERS:
        problems.append(f"user_model_updates: {len(value)} peers, at most {MAX_PEERS}")
    updates = {}
    for peer, items in list(value.items())[:MAX_PEERS]:
        if not PEER.match(peer):
            problems.append(f"user_model_updates: {peer[:60]!r} is not a peer id")
            continue
        texts = _texts(items, f"user_model_updates.{peer}", problems)
        if texts:
            updates[peer] = texts
    return updates


def check_at_seconds(iso: str) -> float:
    """Unix seconds of a validated `next_check_at`."""
    return datetime.fromisoformat(iso).timestamp()


def utc_day(at: float) -> str:
    """The UTC date (YYYY-MM-DD) of unix seconds."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
