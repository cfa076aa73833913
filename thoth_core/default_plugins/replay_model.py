"""The `replay` provider: answers from a scripted JSON file, for demos and tests.

The file is a list of rules; the first whose `match` (a regular expression searched in the
last user message) and `purpose` (`turn`, `reflection`, ...) fit gives the reply:
`[{"match": "hello", "reply": "Hi!"}, {"purpose": "reflection", "reply": "{...}"}, {"reply": "fallback"}]`.
A request with an `answer` schema gets the scripted text as is; the caller validates it, as it
does any provider's (`thoth_core.answers`), and the schema counts in the prompt's tokens.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from thoth_core import ConfigError, ModelRequest, Usage, count_tokens, hookimpl
from thoth_core.answers import system_with_schema

if TYPE_CHECKING:
    from thoth_core.runtime import Runtime

KEEP_REQUESTS = 100
CONFIG_DEFAULTS = {"models.replay": {"file": None, "rules": None, "delay": 0}}  # every key; None: no default
RULES_HELP = "expected a list of rules, each with a 'reply' (and a valid 'match' pattern)"


class ReplayModel:
    """Replies from scripted rules; never calls a network."""

    name = "replay"
    tool_types = frozenset({"custom"})  # it is given the turn's tools (kept in `requests`), and calls none

    def __init__(self, rules: list[dict[str, Any]], *, delay: float = 0.0) -> None:
        self.rules = rules
        self.delay = delay
        self.requests: list[ModelRequest] = []  # the most recent ones, for tests and demos

    @classmethod
    def from_file(cls, path: Path, *, delay: float = 0.0) -> ReplayModel:
        """Load rules from a JSON file, with a one-line error naming the file."""
        try:
            rules = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot load replay script: {exc}") from exc
        if not valid_rules(rules):
            raise ConfigError(f"{path}: {RULES_HELP}")
        return cls(rules, delay=delay)

    def answer(self, request: ModelRequest) -> str:
        """The scripted reply for a request."""
        last = request.messages[-1].content if request.messages else ""
        for rule in self.rules:
            if rule.get("purpose", request.purpose) != request.purpose:
                continue
            if "match" in rule and not re.search(rule["match"], last, re.IGNORECASE):
                continue
            return str(rule["reply"])
        return "(replay script has no reply for this message)"

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        """Yield the scripted reply word by word."""
        self.requests.append(request)
        del self.requests[:-KEEP_REQUESTS]
        text = self.answer(request)
        for piece in re.findall(r"\S+\s*|\s+", text):
            if self.delay:
                await asyncio.sleep(self.delay)
            yield piece
        system = system_with_schema(request)  # the prompt a text-only provider would send
        prompt = "".join(block.render() for block in system) + "".join(m.content for m in request.messages)
        yield Usage(input_tokens=count_tokens(prompt), output_tokens=count_tokens(text), cost_usd=0.0)


def valid_rules(rules: Any) -> bool:
    """Rules are a list of objects that each have a reply and, if any, a valid `match` pattern."""
    if not isinstance(rules, list) or not all(isinstance(r, dict) and "reply" in r for r in rules):
        return False
    try:
        for rule in rules:
            re.compile(str(rule.get("match", "")))
    except re.error:
        return False
    return True


def make_replay(runtime: Runtime, options: dict[str, Any]) -> ReplayModel:
    """Build the provider from `[models.replay]`: `file` (required), `delay` seconds per word."""
    delay = runtime.config.number("models.replay.delay", options.get("delay", 0), high=60)
    if "rules" in options:
        if not valid_rules(options["rules"]):
            raise runtime.config.error("models.replay.rules", RULES_HELP)
        return ReplayModel(list(options["rules"]), delay=delay)
    if not options.get("file"):
        raise runtime.config.error("models.replay.file", "the replay provider needs a script file")
    return ReplayModel.from_file(runtime.config.root / options["file"], delay=delay)


@hookimpl
def register_models(register):  # type: ignore[no-untyped-def]
    register("replay", make_replay)
