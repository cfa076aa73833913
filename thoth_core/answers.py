"""Structured model answers: one pydantic model per kind of answer gives its schema, checks and repair.

A layer that needs JSON from the model (a reflection, an identity derivation, a consolidation)
writes one pydantic model and calls `ask_for(model, request, Schema)`. The request carries the
model class as `ModelRequest.answer`; a provider that can constrain its output uses the class's
JSON schema (Anthropic: a forced tool; OpenAI: `response_format`), the others add
`schema_instructions` to the system prompt. The reply's JSON is parsed (code fences and prose
around it tolerated) and validated by the same class; when it does not fit, one repair request
(purpose `<purpose>-repair`) lists the problems, each naming its field path, and a reply that
still does not fit raises `InvalidAnswer` with both attempts.

pydantic is imported when first needed, so importing this module costs nothing at start-up.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

from .errors import ModelError
from .models import Model, ModelRequest, complete
from .types import ContextBlock, Message

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound="BaseModel")

logger = logging.getLogger(__name__)

MAX_ANSWER_CHARS = 100_000
REPAIR_ECHO_CHARS = 4_000
REPAIR = "Your reply does not fit the {name} schema: {problems}. Reply with only the corrected JSON object."
EXPECTED = {
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "typed_dict_type": "an object",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "none_required": "null",
}


@dataclass
class Attempt:
    """One reply that did not fit, and why."""

    text: str
    problems: list[str]


class InvalidAnswer(ModelError):
    """A model's answer that does not fit its schema (after the repair, if any); the user sees the problems."""

    def __init__(self, name: str, attempts: list[Attempt]) -> None:
        super().__init__(f"the model's {name} answer is invalid: {'; '.join(attempts[-1].problems)}")
        self.name = name
        self.attempts = attempts

    @property
    def problems(self) -> list[str]:
        """The problems of the last attempt, each naming its field path."""
        return self.attempts[-1].problems


class AnswerProblems(ValueError):
    """Why one reply does not fit; `problems` name the field paths."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


def answer_name(schema: type[BaseModel]) -> str:
    """The answer kind's name for tools and schemas, e.g. `Reflection` -> `reflection`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", schema.__name__).lower()


@cache
def answer_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of an answer kind (computed once per class)."""
    return schema.model_json_schema()


def answer_description(schema: type[BaseModel]) -> str:
    """What the answer is, from the class docstring."""
    return (schema.__doc__ or answer_name(schema)).strip().splitlines()[0]


def schema_instructions(schema: type[BaseModel]) -> str:
    """The schema as prompt text, for providers that cannot constrain their output."""
    return (
        f"Answer with one JSON object and nothing else: {answer_description(schema)} "
        f"It must match this JSON schema:\n{json.dumps(answer_schema(schema), indent=1)}"
    )


def system_with_schema(request: ModelRequest) -> list[ContextBlock]:
    """The request's system blocks, plus the answer schema as text when one is asked for."""
    if request.answer is None:
        return request.system
    return [*request.system, ContextBlock("answer-schema", schema_instructions(request.answer), stable=True)]


def parse_json(text: str, *, max_chars: int = MAX_ANSWER_CHARS) -> Any:
    """The JSON value in a reply (code fences and prose around one object tolerated); ValueError lists why not."""
    if len(text) > max_chars:
        raise AnswerProblems([f"answer: {len(text)} characters, more than {max_chars}"])
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
        raise AnswerProblems([f"answer: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"]) from exc


def validate(schema: type[T], value: Any, *, context: dict[str, Any] | None = None) -> T:
    """The answer from parsed JSON; raises AnswerProblems naming every bad field."""
    from pydantic import ValidationError

    try:
        return schema.model_validate(value, context=context)
    except ValidationError as exc:
        raise AnswerProblems(problems_of(exc)) from exc


def check(schema: type[T], text: str, *, context: dict[str, Any] | None = None) -> T:
    """Parse and validate a reply's text; raises AnswerProblems."""
    return validate(schema, parse_json(text), context=context)


def problems_of(error: ValidationError) -> list[str]:
    """One line per validation error: `field.path[0]: what is wrong`."""
    problems = []
    for item in error.errors(include_url=False):
        loc = list(item["loc"])
        if loc and loc[-1] == "[key]":  # a bad key of an object: the message names the key
            loc = loc[:-2]
        path = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc).lstrip(".")
        problems.append(f"{path or 'answer'}: {_message(item, root=not loc)}")
    return problems


def _message(item: Any, *, root: bool) -> str:
    kind, value, ctx = item["type"], item.get("input"), item.get("ctx") or {}
    if kind in EXPECTED:
        expected = "a JSON object" if root and EXPECTED[kind] == "an object" else EXPECTED[kind]
        return f"expected {expected}, got {'null' if value is None else type(value).__name__}"
    if kind == "missing":
        return "required"
    if kind in ("value_error", "assertion_error"):
        return str(ctx.get("error", item["msg"]))
    if kind in ("too_long", "string_too_long"):
        unit = "characters" if isinstance(value, str) else "items"
        return f"{len(value) if hasattr(value, '__len__') else '?'} {unit}, at most {ctx.get('max_length')}"
    if kind in ("too_short", "string_too_short"):
        if isinstance(value, str) and ctx.get("min_length") == 1:
            return "expected a non-empty string"
        return f"at least {ctx.get('min_length')} {'characters' if isinstance(value, str) else 'items'}"
    if kind == "string_pattern_mismatch":
        return f"{str(value)[:80]!r} does not match {ctx.get('pattern')}"
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {value!r}"[:200]
    return str(item["msg"])


async def ask_for(
    model: Model,
    request: ModelRequest,
    schema: type[T],
    *,
    context: dict[str, Any] | None = None,
    repair: bool = True,
    on_invalid: Callable[[Attempt], None] | None = None,
) -> T:
    """Ask for one answer of this schema; one repair request when it does not fit; raises InvalidAnswer.

    `context` reaches the schema's validators (e.g. the current time); `on_invalid` is told of
    a first reply that did not fit, before the repair is asked for.
    """
    name = answer_name(schema)
    request = replace(request, answer=schema)
    reply = await complete(model, request)
    try:
        return check(schema, reply.text, context=context)
    except AnswerProblems as first:
        attempts = [Attempt(reply.text, first.problems)]
    if not repair:
        raise InvalidAnswer(name, attempts)
    logger.info("%s answer invalid (%s); asking for a repair", name, "; ".join(attempts[0].problems)[:300])
    if on_invalid is not None:
        on_invalid(attempts[0])
    messages = [
        *request.messages,
        Message("assistant", reply.text[:REPAIR_ECHO_CHARS] or "(empty reply)"),
        Message("user", REPAIR.format(name=name, problems="; ".join(attempts[0].problems))),
    ]
    second = await complete(model, replace(request, messages=messages, purpose=f"{request.purpose}-repair"))
    try:
        return check(schema, second.text, context=context)
    except AnswerProblems as again:
        raise InvalidAnswer(name, [*attempts, Attempt(second.text, again.problems)]) from again
