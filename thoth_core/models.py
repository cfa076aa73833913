"""The model provider interface: a request goes in, text deltas (then usage) stream out.

The core keeps what the pipeline needs to ask any model: `Model`, `ModelRequest`, `complete`,
which provider `thoth.model` names, and the help when none is configured. The providers that
talk to a network or another program (`anthropic`, `openai`, `claude-cli`) are the
`thoth-models` distribution; only `replay` ships here, as the no-network test double.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .types import ContextBlock, Message, Reply, Usage

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .config import Config

NO_MODEL_HELP = (
    "no model is configured. Set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL) to use Claude, "
    "or pick a provider with `thoth config set thoth.model anthropic|openai|claude-cli|replay` "
    "(openai also serves local models: set models.openai.base_url and models.openai.model; "
    "replay needs `thoth config set models.replay.file PATH`; anthropic, openai and claude-cli come with "
    "`pip install thoth-models`). Memory commands work without a model."
)


def configured_model(config: Config) -> str | None:
    """The provider `thoth.model` names, or anthropic when its key or URL is in the environment."""
    name = config.get("thoth.model")
    if name:
        return str(name)
    if os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_BASE_URL"):
        return "anthropic"
    return None


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
