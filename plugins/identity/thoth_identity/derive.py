"""Model calls of the embedded backend: deriving observations from a message, synthesising the dialectic.

Derivation asks the configured model (purpose `derive`) for one `Derivation` answer
(`thoth_core.answers.ask_for`): observations `{content, kind: explicit|deductive, confidence}`
and facts `{subject, predicate, value, confidence}` (triples; `subject` "" is the person, so answers
without it stay valid), as plain dicts. Malformed items are dropped (a bad
item costs that item, not the message); an answer that is not a JSON object raises. The last
message of the request is the peer's own message, so replay rules can match it.

Several waiting turns are derived in one request (`derive_batch`): the peer's messages as
numbered turns, each with the assistant's reply before it, in one user message; every item of
the `BatchDerivation` answer names its `turn`, and an item naming no turn of the batch is dropped.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, Field, StringConstraints, TypeAdapter, ValidationError
from typing_extensions import TypedDict

from thoth_core import ContextBlock, Message, ModelRequest, complete
from thoth_core.answers import ask_for

from .facts import normalize_predicate
from .graph import MAX_PREDICATE, MAX_SUBJECT, PREDICATE

logger = logging.getLogger(__name__)

MAX_TEXT = 1_000
MAX_ITEMS = 50

DERIVE_INSTRUCTIONS = """You maintain a theory of mind of one person ({peer}) for an assistant.
From the person's latest message (and the assistant's previous reply, for context), extract what it
reveals about the person: explicit facts they stated, and deductive inferences that follow with
confidence. Answer with JSON only, a `derivation`: "observations" and "facts".
Write each observation as a short sentence about {peer}. Use "facts" only for stable, structured facts
(name, profession, location, relationships, preferences), each a triple: "subject" is "" for {peer}
or the name of a person or thing they mention, "predicate" a snake_case relation, "value" the object,
e.g. {{"subject": "", "predicate": "sister", "value": "Maria"}} and
{{"subject": "Maria", "predicate": "lives_in", "value": "Berlin"}}.
Return empty lists if the message reveals nothing."""

BATCH_INSTRUCTIONS = """You maintain a theory of mind of one person ({peer}) for an assistant.
Below are {count} of the person's messages in order, each a numbered <turn> with the assistant's previous
reply before it, for context. From each message, extract what it reveals about the person: explicit facts
they stated, and deductive inferences that follow with confidence. Answer with JSON only, a
`batch_derivation`: "observations" and "facts", every item with "turn": the number of the message it comes from.
Write each observation as a short sentence about {peer}. Use "facts" only for stable, structured facts
(name, profession, location, relationships, preferences), each a triple: "subject" is "" for {peer}
or the name of a person or thing they mention, "predicate" a snake_case relation, "value" the object,
e.g. {{"turn": 1, "subject": "", "predicate": "sister", "value": "Maria"}} and
{{"turn": 2, "subject": "Maria", "predicate": "lives_in", "value": "Berlin"}}.
Return empty lists if the messages reveal nothing."""

SYNTHESIS_INSTRUCTIONS = """You are the dialectic of an assistant's memory of one person ({peer}).
Given what is known about them (below) and their new message, answer in at most four short sentences:
what should the assistant know about {peer} to respond well right now? Use only what is known."""


def _confidence(default: float) -> Any:
    """A number in 0..1 (clamped); the default when missing or not a number."""

    def coerce(value: Any) -> float:
        try:
            return max(0.0, min(1.0, float(value)))
        except (TypeError, ValueError):
            return default

    return BeforeValidator(coerce)


Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_TEXT)]


class Observation(TypedDict):
    """Something the message reveals about the person."""

    content: Annotated[Text, Field(description="a short sentence about the person")]
    kind: Annotated[
        Literal["explicit", "deductive"],
        BeforeValidator(lambda kind: kind if kind in ("explicit", "deductive") else "explicit"),
        Field(description="explicit: they said it; deductive: it follows from what they said"),
    ]
    confidence: Annotated[float, _confidence(0.7), Field(ge=0, le=1)]


class Fact(TypedDict):
    """A stable, structured fact: a triple about the person (subject "") or someone or something they mention."""

    subject: Annotated[
        str,
        BeforeValidator(lambda name: " ".join(str(name or "").split())),
        StringConstraints(max_length=MAX_SUBJECT),
        Field(description='"" for the person, else the name of the person or thing the fact is about'),
    ]
    predicate: Annotated[
        str,
        BeforeValidator(lambda name: normalize_predicate(str(name))),
        StringConstraints(min_length=1, max_length=MAX_PREDICATE, pattern=PREDICATE.pattern),
        Field(description="name, profession, location, preference or a relation, in snake_case"),
    ]
    value: Text
    confidence: Annotated[float, _confidence(0.5), Field(ge=0, le=1)]


def _observation(item: Any) -> Any:
    if isinstance(item, dict) and "turn" in item:
        return {**_observation({k: v for k, v in item.items() if k != "turn"}), "turn": item["turn"]}
    if isinstance(item, str):
        return {"content": item, "kind": "explicit", "confidence": None}
    if isinstance(item, dict):
        return {"content": item.get("content"), "kind": item.get("kind"), "confidence": item.get("confidence")}
    return item


def _fact(item: Any) -> Any:
    if isinstance(item, dict) and "turn" in item:
        return {**_fact({k: v for k, v in item.items() if k != "turn"}), "turn": item["turn"]}
    if isinstance(item, dict):
        value = item.get("value", item.get("object"))
        return {
            "subject": item.get("subject", ""),
            "predicate": item.get("predicate", ""),
            "value": value,
            "confidence": item.get("confidence"),
        }
    return item


def _valid_items(item_type: Any) -> Any:
    """Keep the items that validate (None is an empty list); a bad item costs that item only."""
    adapter: TypeAdapter[Any] = TypeAdapter(item_type)

    def keep(items: Any) -> Any:
        if items is None:
            return []
        if not isinstance(items, list):
            return items  # the list type names the problem
        kept = []
        for item in items[:MAX_ITEMS]:
            try:
                kept.append(adapter.validate_python(item))
            except ValidationError as exc:
                logger.debug("identity: dropped a derived item: %s", exc.errors(include_url=False)[:1])
        return kept

    return BeforeValidator(keep)


ObservationItem = Annotated[Observation, BeforeValidator(_observation)]
FactItem = Annotated[Fact, BeforeValidator(_fact)]


class Derivation(BaseModel):
    """What one message reveals about the person: observations about them and stable facts."""

    observations: Annotated[list[ObservationItem], _valid_items(ObservationItem)] = Field(default_factory=list)
    facts: Annotated[list[FactItem], _valid_items(FactItem)] = Field(default_factory=list)


class TurnObservation(Observation):
    """An observation and the turn of the batch it comes from."""

    turn: Annotated[int, Field(ge=1, description="the number of the message it comes from")]


class TurnFact(Fact):
    """A fact and the turn of the batch it comes from."""

    turn: Annotated[int, Field(ge=1, description="the number of the message it comes from")]


TurnObservationItem = Annotated[TurnObservation, BeforeValidator(_observation)]
TurnFactItem = Annotated[TurnFact, BeforeValidator(_fact)]


class BatchDerivation(BaseModel):
    """What several numbered messages reveal about the person, each item naming the message (`turn`)."""

    observations: Annotated[list[TurnObservationItem], _valid_items(TurnObservationItem)] = Field(default_factory=list)
    facts: Annotated[list[TurnFactItem], _valid_items(TurnFactItem)] = Field(default_factory=list)

    def of_turn(self, turn: int) -> Derivation:
        """The items of one turn (numbered from 1), as one message's derivation."""
        return Derivation.model_construct(
            observations=[_without_turn(o) for o in self.observations if o["turn"] == turn],
            facts=[_without_turn(f) for f in self.facts if f["turn"] == turn],
        )


def _without_turn(item: Any) -> Any:
    return {key: value for key, value in item.items() if key != "turn"}


BATCH_TAGS = re.compile(r"<(/?)(turn|message|previous-assistant-reply)\b", re.IGNORECASE)


def _untagged(text: str) -> str:
    """Text whose own `<turn>`, `<message>` tags cannot pass for the batch's (`‹turn`): no turn borrows another's."""
    return BATCH_TAGS.sub(lambda m: f"\u2039{m.group(1)}{m.group(2)}", text)


def batch_text(turns: list[tuple[str, str | None]]) -> str:
    """The numbered turns (message, the assistant's reply before it) as the batch request's one user message."""
    parts = []
    for number, (raw, before_raw) in enumerate(turns, start=1):
        message, previous = _untagged(raw), before_raw and _untagged(before_raw)
        before = f"<previous-assistant-reply>\n{previous}\n</previous-assistant-reply>\n" if previous else ""
        parts.append(f'<turn n="{number}">\n{before}<message>\n{message}\n</message>\n</turn>')
    return "\n".join(parts)


async def derive_batch(model: Any, *, peer: str, turns: list[tuple[str, str | None]]) -> list[Derivation]:
    """Ask the model, in one request, what each of several messages reveals; one derivation per turn, in order."""
    instructions = BATCH_INSTRUCTIONS.format(peer=peer, count=len(turns))
    request = ModelRequest(
        system=[ContextBlock(tag="instructions", text=instructions, stable=True)],
        messages=[Message("user", batch_text(turns))],
        max_tokens=min(4096, 256 + 256 * len(turns)),
        purpose="derive",
    )
    answer = await ask_for(model, request, BatchDerivation, repair=False)
    return [answer.of_turn(number) for number in range(1, len(turns) + 1)]


async def derive(model: Any, *, peer: str, user_text: str, previous_reply: str | None) -> Derivation:
    """Ask the model what one message reveals about the peer."""
    system = [ContextBlock(tag="instructions", text=DERIVE_INSTRUCTIONS.format(peer=peer), stable=True)]
    if previous_reply:
        system.append(ContextBlock(tag="previous-assistant-reply", text=previous_reply))
    request = ModelRequest(system=system, messages=[Message("user", user_text)], max_tokens=512, purpose="derive")
    return await ask_for(model, request, Derivation, repair=False)


async def synthesize(model: Any, *, peer: str, known: str, user_text: str) -> str:
    """Ask the model what matters about the peer for this message, from what is known."""
    request = ModelRequest(
        system=[
            ContextBlock(tag="instructions", text=SYNTHESIS_INSTRUCTIONS.format(peer=peer), stable=True),
            ContextBlock(tag="known", text=known),
        ],
        messages=[Message("user", user_text)],
        max_tokens=200,
        purpose="dialectic",
    )
    reply = await complete(model, request)
    return re.sub(r"\s+\n", "\n", reply.text).strip()
