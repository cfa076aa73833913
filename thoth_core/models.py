"""The model provider interface: a request goes in, text deltas (then usage) stream out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .types import ContextBlock, Message, Reply, Usage

if TYPE_CHECKING:
    from pydantic import BaseModel

NO_MODEL_HELP = (
    "no model is configured. Set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL) to use Claude, "
    "or pick a provider with `thoth config set thoth.model anthropic|openai|claude-cli|replay` "
    "(openai also serves local models: set models.openai.base_url and models.openai.model; "
    "replay needs `thoth config set models.replay.file PATH`). Memory commands work without a model."
)


@dataclass
class ModelRequest:
    """What a provider is asked: system blocks (stable ones first), messages, limits.

    `answer`, when set, is the pydantic model the reply must be a JSON instance of: providers
    that can constrain their output use its JSON schema, the others add it to the system prompt
    (see `thoth_core.answers`).
    """

    system: list[ContextBlock]
    messages: list[Message]
    max_tokens: int = 1024
    purpose: str = "turn"
    tools: list[dict[str, object]] = field(default_factory=list)
    answer: type[BaseModel] | None = None

    @property
    def system_text(self) -> str:
        """The system blocks joined as one prompt."""
        return "\n\n".join(block.render() for block in self.system)


@runtime_checkable
class Model(Protocol):
    """A model provider; `stream` yields text deltas and may end with one Usage."""

    name: str

    def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        """Answer the request, yielding the reply text as it arrives."""
        ...


async def complete(model: Model, request: ModelRequest) -> Reply:
    """Run a request to the end and return the whole reply."""
    parts: list[str] = []
    usage = Usage()
    async for item in model.stream(request):
        if isinstance(item, Usage):
            usage = item
        else:
            parts.append(item)
    return Reply(text="".join(parts), model=model.name, usage=usage)
