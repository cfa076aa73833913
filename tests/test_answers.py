"""Structured answers (`thoth_core.answers`): JSON parsing, field-path problems, one repair, the typed error."""

from __future__ import annotations

from typing import Annotated

import pytest
from pydantic import BaseModel, Field, StringConstraints

from thoth_core import Message, ModelRequest
from thoth_core.answers import AnswerProblems, InvalidAnswer, ask_for, parse_json, schema_instructions, validate
from thoth_core.default_plugins.replay_model import ReplayModel


class Step(BaseModel):
    """One step of a plan."""

    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=20)]
    minutes: int


class Plan(BaseModel):
    """A short plan."""

    steps: list[Step] = Field(max_length=2)
    owners: dict[str, list[str]] = {}


def request(text: str = "plan it") -> ModelRequest:
    return ModelRequest(system=[], messages=[Message("user", text)], purpose="plan")


def test_json_is_found_in_fences_and_prose_and_garbage_says_why():
    assert parse_json('```json\n{"a": 1}\n```') == {"a": 1}
    assert parse_json('Here you go: {"a": {"b": 2}} enjoy') == {"a": {"b": 2}}
    with pytest.raises(AnswerProblems, match=r"not valid JSON: Expecting value at line 1 column 1"):
        parse_json("no json here")
    with pytest.raises(AnswerProblems, match=r"^answer: 11 characters, more than 10$"):
        parse_json('{"a": "bc"}', max_chars=10)


def test_each_problem_names_its_field_path():
    bad = {"steps": [{"title": " ", "minutes": "ten"}, {"title": "x" * 30}], "owners": {"ann": "all"}}
    with pytest.raises(AnswerProblems) as info:
        validate(Plan, bad)
    assert info.value.problems == [
        "steps[0].title: expected a non-empty string",
        "steps[0].minutes: expected an integer, got str",
        "steps[1].title: 30 characters, at most 20",
        "steps[1].minutes: required",
        "owners.ann: expected a list, got str",
    ]
    with pytest.raises(AnswerProblems, match=r"^steps: 3 items, at most 2$"):
        validate(Plan, {"steps": [{"title": "a", "minutes": 1}] * 3})
    with pytest.raises(AnswerProblems, match=r"^answer: expected a JSON object, got list$"):
        validate(Plan, [1])


async def test_a_valid_answer_needs_one_request_carrying_the_schema():
    model = ReplayModel([{"purpose": "plan", "reply": '{"steps": [{"title": " Build ", "minutes": 5}]}'}])
    plan = await ask_for(model, request(), Plan)
    assert plan == Plan(steps=[Step(title="Build", minutes=5)])
    [sent] = model.requests
    assert sent.answer is Plan and sent.purpose == "plan"


async def test_an_invalid_answer_gets_one_repair_naming_the_problems():
    model = ReplayModel(
        [
            {"purpose": "plan", "reply": '{"steps": [{"title": "Build"}]}'},
            {"purpose": "plan-repair", "reply": '{"steps": [{"title": "Build", "minutes": 5}]}'},
        ]
    )
    seen = []
    plan = await ask_for(model, request(), Plan, on_invalid=seen.append)
    assert plan.steps[0].minutes == 5
    first, repair = model.requests
    assert [m.role for m in repair.messages] == ["user", "assistant", "user"]
    assert repair.messages[1].content == '{"steps": [{"title": "Build"}]}'
    assert repair.messages[2].content == (
        "Your reply does not fit the plan schema: steps[0].minutes: required. "
        "Reply with only the corrected JSON object."
    )
    assert repair.answer is Plan and [a.problems for a in seen] == [["steps[0].minutes: required"]]


async def test_still_invalid_after_the_repair_raises_with_both_attempts():
    model = ReplayModel([{"purpose": "plan", "reply": "no idea"}, {"purpose": "plan-repair", "reply": '{"steps": 3}'}])
    with pytest.raises(InvalidAnswer) as info:
        await ask_for(model, request(), Plan)
    assert [a.text for a in info.value.attempts] == ["no idea", '{"steps": 3}']
    assert info.value.problems == ["steps: expected a list, got int"]
    assert str(info.value) == "the model's plan answer is invalid: steps: expected a list, got int"
    model.requests.clear()
    with pytest.raises(InvalidAnswer):
        await ask_for(model, request(), Plan, repair=False)
    assert len(model.requests) == 1


def test_schema_instructions_carry_the_json_schema():
    text = schema_instructions(Plan)
    assert text.startswith("Answer with one JSON object and nothing else: A short plan.")
    assert '"maxItems": 2' in text and '"minutes"' in text
