"""The model provider interface: a request goes in, text deltas (then usage) stream out."""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from .lazy_reexports import defer_reexports
from .types import ContextBlock, Message, Reply, Usage

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .config import Config

NO_MODEL_HELP = (
    "no model is configured. Set ANTHROPIC_API_KEY (and optionally ANTHROPIC_BASE_URL) to use Claude, "
    "or pick a provider with `thoth config set thoth.model anthropic|openai|claude-cli|replay` "
    "(openai also serves local models: set models.openai.base_url and models.openai.model; "
    "replay needs `thoth config set models.replay.file PATH`). Memory commands work without a model."
)


PROVIDER_SDKS = {"anthropic": "anthropic", "openai": "openai"}  # the module each provider imports to answer
_imports_started: set[str] = set()
_imports_lock = threading.Lock()


def start_import(module: str) -> None:
    """Import `module` on a daemon thread, once a process, unless it is imported already."""
    with _imports_lock:
        if module in sys.modules or module in _imports_started:
            return
        _imports_started.add(module)
    threading.Thread(target=importlib.import_module, args=(module,), name=f"thoth-import-{module}", daemon=True).start()


def preload_provider_sdk(config: Config) -> None:
    """Start importing the configured provider's SDK (~1-2 s) on a thread, so it overlaps loading the plugins.

    Every SDK's `types` package then imports the types a call uses, not all of them (`lazy_reexports`).
    """
    defer_reexports(*(f"{sdk}.types" for sdk in PROVIDER_SDKS.values()))
    module = PROVIDER_SDKS.get(configured_model(config) or "")
    if module:
        start_import(module)


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
