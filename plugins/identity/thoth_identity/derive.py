"""Model calls of the embedded backend: deriving observations from a message, synthesising the dialectic.

Derivation asks the configured model (purpose `derive`) for JSON:
`{"observations": [{"content": str, "kind": "explicit"|"deductive", "confidence": 0..1}],
  "facts": [{"predicate": str, "value": str, "confidence": 0..1}]}`.
The last message of the request is the peer's own message, so replay rules can match it.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import Any

from thoth_core import ContextBlock, Message, ModelRequest, complete

from .facts import normalize_predicate

logger = logging.getLogger(__name__)

DERIVE_INSTRUCTIONS = """You maintain a theory of mind of one person ({peer}) for an assistant.
From the person's latest message (and the assistant's previous reply, for context), extract what it
reveals about the person: explicit facts they stated, and deductive inferences that follow with
confidence. Answer with JSON only:
{{"observations": [{{"content": "...", "kind": "explicit" or "deductive", "confidence": 0.0-1.0}}],
  "facts": [{{"predicate": "name|profession|location|preference|<relation>", "value": "...", "confidence": 0.0-1.0}}]}}
Write each observation as a short sentence about {peer}. Use "facts" only for stable, structured facts
(name, profession, relationships, preferences). Return empty lists if the message reveals nothing."""

SYNTHESIS_INSTRUCTIONS = """You are the dialectic of an assistant's memory of one person ({peer}).
Given what is known about them (below) and their new message, answer in at most four short sentences:
what should the assistant know about {peer} to respond well right now? Use only what is known."""


@dataclass
class Derivation:
    """What the model read from one message."""

    observations: list[dict[str, Any]] = field(default_factory=list)
    facts: list[dict[str, Any]] = field(default_factory=list)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in a model answer (code fences and prose around it allowed)."""
    start = text.find("{")
    while start != -1:
        try:
            value, _ = json.JSONDecoder().raw_decode(text[start:])
        except json.JSONDecodeError:
            start = text.find("{", start + 1)
            continue
        return value if isinstance(value, dict) else None
    return None


def parse_derivation(text: str) -> Derivation:
    """Validate a derivation answer; malformed items are dropped, a non-JSON answer raises ValueError."""
    data = _json_object(text)
    if data is None:
        raise ValueError(f"derivation answer is not a JSON object: {text[:80]!r}")
    result = Derivation()
    for item in data.get("observations") or []:
        if isinstance(item, str):
            item = {"content": item}
        if not isinstance(item, dict) or not str(item.get("content", "")).strip():
            continue
        kind = item.get("kind") if item.get("kind") in ("explicit", "deductive") else "explicit"
        result.observations.append(
            {"content": str(item["content"]).strip(), "kind": kind, "confidence": _confidence(item, 0.7)}
        )
    for item in data.get("facts") or []:
        if not isinstance(item, dict):
            continue
        predicate = normalize_predicate(str(item.get("predicate", "")))
        value = str(item.get("value", item.get("object", ""))).strip()
        if predicate and value:
            result.facts.append({"predicate": predicate, "value": value, "confidence": _confidence(item, 0.5)})
    return result


def _confidence(item: dict[str, Any], default: float) -> float:
    try:
        return max(0.0, min(1.0, float(item.get("confidence", default))))
    except (TypeError, ValueError):
        return default


async def derive(model: Any, *, peer: str, user_text: str, previous_reply: str | None) -> Derivation:
    """Ask the model what one message reveals about the peer."""
    system = [ContextBlock(tag="instructions", text=DERIVE_INSTRUCTIONS.format(peer=peer), stable=True)]
    if previous_reply:
        system.append(ContextBlock(tag="previous-assistant-reply", text=previous_reply))
    request = ModelRequest(system=system, messages=[Message("user", user_text)], max_tokens=512, purpose="derive")
    reply = await complete(model, request)
    return parse_derivation(reply.text)


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
