"""What the SDK model providers (`anthropic`, `openai`) share: options, the client per runtime, tools, costs."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import os
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from thoth_core import ModelNotConfigured, ModelRequest, ToolLimit, Usage
from thoth_core.schema import Number, Text

if TYPE_CHECKING:
    from thoth_core import Runtime

DEFAULT_TIMEOUT = 60.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_TOOL_ROUNDS = 8  # a backstop: `[thoth] tool_calls` bounds a turn's calls
HIGHEST = {"timeout": 86_400.0, "max_retries": 100, "max_tool_rounds": 100, "max_tokens": 10_000_000}
# The rules of every SDK provider's table, checked at start (thoth_core.schema); `common_options` reads the same.
OPTION_RULES = {
    "model": Text(max_length=256),
    "base_url": Text(max_length=2048),
    "timeout": Number(high=HIGHEST["timeout"]),
    **{key: Number(high=HIGHEST[key], integer=True) for key in ("max_retries", "max_tool_rounds", "max_tokens")},
}


_imports_started: set[str] = set()
_imports_lock = threading.Lock()


def start_import(module: str) -> None:
    """Import `module` on a daemon thread, once a process, unless it is imported already."""
    with _imports_lock:
        if module in sys.modules or module in _imports_started:
            return
        _imports_started.add(module)
    threading.Thread(target=importlib.import_module, args=(module,), name=f"thoth-import-{module}", daemon=True).start()


def preload_when_chosen(runtime: Runtime, provider: str) -> None:
    """Start importing the provider's SDK (`provider` is also its module) when it is the configured model.

    Called from the provider's `configure` hook, as the runtime starts: the import (~1-2 s) then
    overlaps the session start and the context stage of the first turn.
    """
    if runtime.model_name() == provider:
        start_import(provider)


class SDKModel:
    """A provider streaming through an SDK client, with its timeout, retries, tool rounds and prices."""

    tool_types: frozenset[str] = frozenset({"custom"})  # the tool `type`s it sends (custom: a schema and a handler)

    def __init__(
        self,
        client: Any,
        *,
        model: str,
        max_tokens: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        max_tool_rounds: int = DEFAULT_TOOL_ROUNDS,
        price: tuple[float, float] | None = None,
        url_source: str = "the API",
    ) -> None:
        self.client = client
        self.model = model
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_tool_rounds = max_tool_rounds
        self.price = price
        self.url_source = url_source

    @staticmethod
    def tool_handlers(request: ModelRequest) -> dict[str, Callable[..., Any]]:
        """The request's tools that the provider runs itself, by name (those with a `handler`)."""
        tools = [tool for tool in request.tools if callable(tool.get("handler"))]
        return {str(tool["name"]): cast(Callable[..., Any], tool["handler"]) for tool in tools}


def cost_of(usage: Usage, price: tuple[float, float] | None) -> float | None:
    """The estimated dollar cost of one reply."""
    if price is None:
        return None
    per_input, per_output = price[0] / 1e6, price[1] / 1e6
    return round(
        usage.input_tokens * per_input
        + usage.cache_write_tokens * per_input * 1.25
        + usage.cache_read_tokens * per_input * 0.1
        + usage.output_tokens * per_output,
        6,
    )


async def run_tool(handler: Callable[..., Any], tool_use_id: str, tool_input: Any) -> tuple[dict[str, Any], bool]:
    """Run a tool handler: its result (or error) as a tool_result block, and whether it hit the turn's tool limits."""
    try:
        output = (
            handler(tool_input)
            if inspect.iscoroutinefunction(handler)
            else await asyncio.to_thread(handler, tool_input)
        )
        if inspect.isawaitable(output):
            output = await output
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": str(output)}, False
    except ToolLimit as exc:  # not run: the model is told, then asked to answer without tools
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": str(exc), "is_error": True}, True
    except Exception as exc:  # noqa: BLE001 - the model is told the tool failed
        content = f"{type(exc).__name__}: {exc}"
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content, "is_error": True}, False


class ClientState:
    """The runtime's SDK client; `runtime.aclose()` closes its connections."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def close(self) -> Any:
        """A coroutine closing the client inside an event loop; outside one, the sockets die with it."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return None
        return self.client.close()


def number_option(
    runtime: Runtime, options: dict[str, Any], table: str, key: str, default: float | None, *, kind: type = float
) -> Any:
    """A finite non-negative number (or integer) option of a `[models.NAME]` table; default (None too) when missing."""
    value = options.get(key, default)
    if value is None:
        return None
    if kind is int:
        return runtime.config.integer(f"{table}.{key}", value, high=HIGHEST[key])
    return runtime.config.number(f"{table}.{key}", value, high=HIGHEST[key])


def common_options(
    runtime: Runtime, options: dict[str, Any], table: str
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The checked options every SDK provider reads from `[models.NAME]`: its SDKModel keywords, and `prices`."""
    prices = options.get("prices")
    if prices is not None and not (isinstance(prices, dict) and {"input", "output"} <= set(prices)):
        raise runtime.config.error(
            f"{table}.prices", "expected { input = DOLLARS, output = DOLLARS } per million tokens"
        )
    keywords = {
        "timeout": number_option(runtime, options, table, "timeout", DEFAULT_TIMEOUT),
        "max_retries": number_option(runtime, options, table, "max_retries", DEFAULT_MAX_RETRIES, kind=int),
        "max_tokens": number_option(runtime, options, table, "max_tokens", None, kind=int) or None,
        "max_tool_rounds": number_option(runtime, options, table, "max_tool_rounds", DEFAULT_TOOL_ROUNDS, kind=int),
    }
    return keywords, prices


def base_url(provider: str, options: dict[str, Any], variable: str, public: str) -> tuple[str | None, str]:
    """`[models.NAME] base_url`, else the SDK's environment variable (None: the public API), and what errors call it.

    The SDKs read the variable themselves when no URL is given, and an empty one becomes the URL "".
    """
    if options.get("base_url"):
        return options["base_url"], f"models.{provider}.base_url"
    if os.environ.get(variable) == "":
        raise ModelNotConfigured(f"{provider}: {variable} is set but empty; unset it for the public API, or set a URL")
    url = os.environ.get(variable) or None
    return url, variable if url else f"the {public} API at"
