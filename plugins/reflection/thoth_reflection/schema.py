"""The answers reflection asks the model for: one pydantic model each gives the JSON schema, the validation
and the repair problems (through `thoth_core.answers.ask_for`).

`Reflection` is the session-end review, `Consolidation` the nightly snapshot rewrite,
`ReflexionRecord` a known-issue record drafted after a failed turn (seed 003, tier 3); `validate`
turns parsed JSON into the normalised reflection dict the layers get. Sizes are capped so
a runaway or hostile model cannot flood persona files; a skill name must be a plain slug, a
peer id a plain id, and a check-in at most `MAX_CHECK_IN_DAYS` ahead (the validation context
carries `now`, unix seconds). Strings are stripped and empty ones dropped.
"""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
)

from thoth_core.answers import validate as validate_answer

MAX_ITEMS = 20
MAX_TEXT = 1_000
MAX_PEERS = 20
MAX_NAME = 64
MAX_DESCRIPTION = 1_024
MAX_BODY = 20_000
MAX_CHECK_IN_DAYS = 366
MAX_SNAPSHOT_LINES = 1_000
SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
PEER = re.compile(r"^[^\s/\\<>`]{1,100}$")


def matching(pattern: re.Pattern[str], what: str) -> Any:
    """A validator refusing a string that does not match, naming what it should be."""

    def check(value: str) -> str:
        if not pattern.match(value):
            raise ValueError(f"{value[:80]!r} is not {what}")
        return value

    return AfterValidator(check)


def _none_as(empty: Any) -> Any:
    return BeforeValidator(lambda value: empty() if value is None else value)


Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_TEXT)]
Texts = Annotated[
    list[Text],
    _none_as(list),
    Field(max_length=MAX_ITEMS),
    AfterValidator(lambda texts: [t for t in texts if t]),
]
Slug = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_NAME),
    matching(SLUG, "a slug (lowercase letters, digits, single hyphens)"),
    Field(json_schema_extra={"pattern": SLUG.pattern}),
]
PeerId = Annotated[str, matching(PEER, "a peer id"), Field(json_schema_extra={"pattern": PEER.pattern})]


class Skill(BaseModel):
    """A reusable multi-step procedure that emerged in the session."""

    name: Slug = Field(description="a lowercase slug, e.g. deploy-staging")
    description: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_DESCRIPTION)] = (
        Field(description="when to use it")
    )
    body: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_BODY)] = Field(
        description="the steps, in markdown"
    )


class Reflection(BaseModel):
    """A review of a finished conversation, so the agent can learn from it."""

    what_worked: Texts = Field(default_factory=list, description="short lessons")
    what_didnt: Texts = Field(default_factory=list, description="short lessons")
    skill: Skill | None = Field(default=None, description="only when a reusable procedure emerged; otherwise null")
    memory_notes: Texts = Field(
        default_factory=list, description="durable facts useful in later sessions; never secrets, passwords or keys"
    )
    persona_observations: Texts = Field(
        default_factory=list, description="about the agent's own behaviour, for its maintainers to consider"
    )
    next_check_at: str | None = Field(
        default=None,
        description=f"ISO-8601 UTC time to check back on this thread (at most {MAX_CHECK_IN_DAYS} days ahead), or null",
        json_schema_extra={"format": "date-time"},
    )
    user_model_updates: Annotated[
        dict[PeerId, Texts], _none_as(dict), AfterValidator(lambda updates: {p: t for p, t in updates.items() if t})
    ] = Field(
        default_factory=dict,
        max_length=MAX_PEERS,
        description="what we learned about each person, keyed by the peer id shown in the transcript",
    )

    @field_validator("next_check_at", mode="before")
    @classmethod
    def _check_at(cls, value: Any, info: ValidationInfo) -> str | None:
        """An ISO-8601 time, at most MAX_CHECK_IN_DAYS ahead of `now`, normalised to UTC with a Z."""
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise ValueError(f"expected an ISO-8601 string or null, got {type(value).__name__}")
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"{value[:60]!r} is not an ISO-8601 time") from None
        when = when if when.tzinfo else when.replace(tzinfo=UTC)
        now = float((info.context or {}).get("now", time.time()))
        if when.timestamp() > now + MAX_CHECK_IN_DAYS * 86400:
            raise ValueError(f"{value[:60]!r} is more than {MAX_CHECK_IN_DAYS} days away")
        return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


class SnapshotLine(BaseModel):
    """One fact of the memory snapshot."""

    day: Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^\d{4}-\d{2}-\d{2}$")] = Field(
        description="YYYY-MM-DD, the day the fact is from"
    )
    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT)] = Field(
        description="the fact, one short sentence"
    )
    sources: Annotated[list[Annotated[int, Field(ge=1)]], _none_as(list), Field(max_length=MAX_SNAPSHOT_LINES)] = Field(
        default_factory=list, description="the numbers of the input lines this line keeps or merges"
    )


class Consolidation(BaseModel):
    """The agent's long-term memory snapshot with the new material merged in, newest line last."""

    lines: Annotated[list[SnapshotLine], Field(min_length=1, max_length=MAX_SNAPSHOT_LINES)]


Section = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT)]
Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40)]


class ReflexionRecord(BaseModel):
    """A known-issue record about a failed turn: what went wrong, why, what fixes it, how to avoid it."""

    slug: Slug = Field(description="a short lowercase slug naming the issue, e.g. billing-db-refused")
    task: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200)] = Field(
        description="what the agent was trying to do"
    )
    severity: Literal["low", "medium", "high", "critical"] = Field(description="how bad the failure was")
    tags: Annotated[list[Tag], _none_as(list), Field(max_length=8)] = Field(
        default_factory=list, description="a few words an error of this kind would contain"
    )
    known_issue: Section = Field(description="what went wrong, with the error's distinctive words")
    root_cause: Section = Field(description="why it happened, as far as the transcript shows")
    solution: Section = Field(description="what fixes it or works around it")
    prevention: Section = Field(description="how to avoid it in future")


def as_result(reflection: Reflection) -> dict[str, Any]:
    """The reflection as the plain dict the `reflection_result` hook passes on."""
    return reflection.model_dump()


def validate(value: Any, *, now: float) -> dict[str, Any]:
    """The normalised reflection from parsed JSON; raises AnswerProblems naming every bad field."""
    return as_result(validate_answer(Reflection, value, context={"now": now}))


def check_at_seconds(iso: str) -> float:
    """Unix seconds of a validated `next_check_at`."""
    return datetime.fromisoformat(iso).timestamp()


def utc_day(at: float) -> str:
    """The UTC date (YYYY-MM-DD) of unix seconds."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d")
