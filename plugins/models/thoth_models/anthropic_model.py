"""The `anthropic` provider: Claude through the official SDK, streamed, with prompt caching.

Options, all in `[models.anthropic]` of thoth.toml:
- `model` (default `claude-sonnet-4-6`), `max_tokens` (default `[thoth] max_tokens`);
- `api_key`: a reference such as `{ "$env" = "MY_KEY" }`; default `ANTHROPIC_API_KEY`;
- `base_url`: default `ANTHROPIC_BASE_URL`, else the public API;
- `timeout`: seconds to wait for the API per attempt (while streaming: between two events),
  default 60 (the SDK's own default is 600);
- `max_retries`: default 2 (the SDK retries 408, 409, 429 and 5xx, honouring retry-after);
- `max_tool_rounds`: default 8 (a backstop; `[thoth] tool_calls` bounds a turn);
- `prices`: `{ input = 3.0, output = 15.0 }` dollars per million tokens, for models missing
  from `PRICES`.

The system prompt goes as a list of text blocks; the last *stable* block (stable blocks come
first) carries `cache_control`, so the API caches the unchanging prefix across turns.
Tools: each `request.tools` entry is an API tool definition; one carrying a `handler`
(callable(input) -> str, may be async) is run when the model calls it, and its result is sent
back, for at most `max_tool_rounds` rounds. Without a handler the reply ends at the call.
After `max_tool_rounds` rounds, or a round whose handler raised `ToolLimit` (the turn's tool
limits are used up; its message goes back as an error result), one more request goes with
`tool_choice: none`, so the reply always ends with an answer. Besides `custom` tools, a
`memory_20250818` tool (`{"type", "name", "handler"}`) passes through and its calls run the
same way (`tool_types`).
A request with an `answer` schema gets it as one more tool, forced through `tool_choice`; the
reply is that tool call's input as JSON text.
The SDK is imported only when the provider is built, so `thoth --help` stays fast; when
`anthropic` is the configured model, this plugin's `configure` hook starts that import on a
thread as the runtime starts (`thoth_models.sdk.preload_when_chosen`), so it overlaps the
session start and the first turn's pre-spawn stage.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from thoth_core import ModelError, ModelNotConfigured, ModelRequest, Usage, hookimpl
from thoth_core.answers import answer_description, answer_name, answer_schema
from thoth_models.sdk import (
    DEFAULT_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    DEFAULT_TOOL_ROUNDS,
    OPTION_RULES,
    ClientState,
    SDKModel,
    base_url,
    common_options,
    cost_of,
    preload_when_chosen,
    run_tool,
)

if TYPE_CHECKING:
    import anthropic

    from thoth_core import Runtime

DEFAULT_MODEL = "claude-sonnet-4-6"
CONFIG_DEFAULTS = {  # every key of [models.anthropic]; None: no default in the file
    "models.anthropic": {
        "model": DEFAULT_MODEL,
        "timeout": DEFAULT_TIMEOUT,
        "max_retries": DEFAULT_MAX_RETRIES,
        "max_tool_rounds": DEFAULT_TOOL_ROUNDS,
        "max_tokens": None,
        "api_key": None,
        "base_url": None,
        "prices": None,
    }
}
CONFIG_SCHEMA = {"models.anthropic": OPTION_RULES}  # checked at start, not when the first turn builds the client
# The largest value of each number option that is not surely a mistake.
CACHE = {"type": "ephemeral"}
NO_TOOLS = {"type": "none"}  # tool_choice: the model answers, it calls no tool
KEY_HELP = "ANTHROPIC_API_KEY or [models.anthropic] api_key"

# Dollars per million input and output tokens (anthropic.com pricing, 2026), by model id without
# its date suffix. Cache writes cost 1.25x input (5-minute cache), cache reads 0.1x input.
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4-0": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4-0": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-haiku": (0.25, 1.25),
}


def price_of(model: str, override: dict[str, Any] | None = None) -> tuple[float, float] | None:
    """Input and output dollars per million tokens for a model id, if known."""
    if override:
        return float(override["input"]), float(override["output"])
    return PRICES.get(re.sub(r"-(\d{8}|latest)$", "", model))


def system_blocks(request: ModelRequest) -> list[dict[str, Any]]:
    """The system prompt as text blocks, cache_control on the last stable one."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": block.render()} for block in request.system]
    stable = [i for i, block in enumerate(request.system) if block.stable]
    if stable:
        blocks[stable[-1]]["cache_control"] = dict(CACHE)
    return blocks


class AnthropicModel(SDKModel):
    """Streams replies from the Messages API through an `AsyncAnthropic` client."""

    name = "anthropic"
    client: anthropic.AsyncAnthropic
    tool_types = frozenset({"custom", "memory_20250818"})

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API parameters for a request."""
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens or request.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.content],
        }
        if request.system:
            params["system"] = system_blocks(request)
        if request.tools:
            params["tools"] = [{k: v for k, v in tool.items() if k != "handler"} for tool in request.tools]
        if request.answer is not None:
            name = answer_name(request.answer)
            tool = {"name": name, "description": answer_description(request.answer)}
            params["tools"] = [*params.get("tools", []), dict(tool, input_schema=answer_schema(request.answer))]
            params["tool_choice"] = {"type": "tool", "name": name}
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        """Yield the reply's text deltas, then one Usage summed over tool rounds."""
        import anthropic

        params = self.params(request)
        handlers = self.tool_handlers(request)
        usage = Usage()
        try:
            spoke = limited = False
            for done in range(self.max_tool_rounds + 1):
                if "tools" in params and request.answer is None and (limited or done == self.max_tool_rounds):
                    params["tool_choice"] = dict(NO_TOOLS)  # the last request: an answer with what the tools gave
                async with self.client.messages.stream(**params) as stream:
                    first = True
                    async for text in stream.text_stream:
                        if first and spoke:
                            yield "\n\n"  # text of an earlier round, before a tool call
                        first, spoke = False, True
                        yield text
                    final = await stream.get_final_message()
                add_usage(usage, final.usage)
                calls = [block for block in final.content if block.type == "tool_use"]
                answers = [c for c in calls if request.answer and c.name == answer_name(request.answer)]
                if answers:  # the forced answer tool: its input is the answer
                    yield json.dumps(answers[0].input)
                    break
                if (
                    params.get("tool_choice") == NO_TOOLS
                    or final.stop_reason != "tool_use"
                    or not calls
                    or not all(c.name in handlers for c in calls)
                ):
                    break
                ran = [await run_tool(handlers[c.name], c.id, c.input) for c in calls]
                limited = any(hit for _, hit in ran)
                params["messages"] = params["messages"] + [
                    {"role": "assistant", "content": [content_param(block) for block in final.content]},
                    {"role": "user", "content": [result for result, _ in ran]},
                ]
        except anthropic.APIError as exc:
            raise self.error(exc) from exc
        usage.cost_usd = cost_of(usage, self.price)
        yield usage

    async def check(self) -> str:
        """For `thoth doctor`: count tokens once, without retries; raises ModelError if unreachable."""
        import anthropic

        started = time.perf_counter()
        client = self.client.with_options(max_retries=0, timeout=min(self.timeout, 10.0))
        try:
            await client.messages.count_tokens(model=self.model, messages=[{"role": "user", "content": "ping"}])
        except anthropic.APIError as exc:
            raise self.error(exc, retried=False) from exc
        return f"{self.model} reachable at {self.client.base_url} ({(time.perf_counter() - started) * 1000:.0f} ms)"

    def error(self, exc: anthropic.APIError, *, retried: bool = True) -> ModelError:
        """One clear line for an SDK error."""
        import anthropic

        status = getattr(exc, "status_code", None)
        retried = retried and status != 200  # an error event inside a stream is not retried
        after = f" after {self.max_retries} retries" if retried and self.max_retries else ""
        if isinstance(exc, anthropic.APITimeoutError):
            where = f"{self.url_source} {self.client.base_url}"
            return ModelError(
                f"anthropic: no answer from {where} within {self.timeout:g}s{after}; raise [models.anthropic] timeout"
            )
        if isinstance(exc, anthropic.APIConnectionError):
            reason = exc.__cause__ or exc
            return ModelError(f"anthropic: cannot reach {self.url_source} {self.client.base_url}: {reason}{after}")
        kind, message = error_details(exc)
        if kind == "authentication_error" or status == 401:
            return ModelError(f"anthropic: authentication failed (401: {message}); check {KEY_HELP}")
        if kind == "permission_error" or status == 403:
            return ModelError(
                f"anthropic: permission denied (403: {message}); the key may not allow model {self.model}"
            )
        if kind == "not_found_error" or status == 404:
            return ModelError(f"anthropic: not found (404: {message}); check [models.anthropic] model = {self.model!r}")
        if kind == "rate_limit_error" or status == 429:
            return ModelError(f"anthropic: rate limited (429){after}: {message}; try again shortly")
        if kind == "overloaded_error" or status == 529:
            return ModelError(f"anthropic: the API is overloaded (529){after}; try again shortly")
        if kind == "invalid_request_error" or status == 400:
            return ModelError(f"anthropic: request rejected (400): {message}")
        return ModelError(f"anthropic: API error ({status or kind}){after}: {message}")


def error_details(exc: Exception) -> tuple[str, str]:
    """The error type and message from an API error body."""
    body = getattr(exc, "body", None)
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict):
        return str(inner.get("type", "")), str(inner.get("message", ""))
    return "", str(getattr(exc, "message", exc))


def content_param(block: Any) -> dict[str, Any]:
    """A response content block as a request parameter (text or tool_use)."""
    if block.type == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    return {"type": "text", "text": getattr(block, "text", "")}


def add_usage(total: Usage, usage: Any) -> None:
    """Add one API response's usage to a running total."""
    total.input_tokens += usage.input_tokens or 0
    total.output_tokens += usage.output_tokens or 0
    total.cache_write_tokens += usage.cache_creation_input_tokens or 0
    total.cache_read_tokens += usage.cache_read_input_tokens or 0


def make_anthropic(runtime: Runtime, options: dict[str, Any]) -> AnthropicModel:
    """Build the provider from `[models.anthropic]` and the ANTHROPIC_* environment."""
    api_key = options.get("api_key") or os.environ.get("ANTHROPIC_API_KEY")
    if not api_key:
        raise ModelNotConfigured(f'anthropic: no API key; set {KEY_HELP} = {{ "$env" = "VAR" }} in thoth.toml')
    model = options.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise runtime.config.error("models.anthropic.model", f"expected a model id, got {model!r}")
    keywords, prices = common_options(runtime, options, "models.anthropic")
    url, source = base_url("anthropic", options, "ANTHROPIC_BASE_URL", "Anthropic")

    import anthropic

    state = runtime.plugin_state(
        "anthropic",
        lambda: ClientState(
            anthropic.AsyncAnthropic(
                api_key=api_key, base_url=url, timeout=keywords["timeout"], max_retries=keywords["max_retries"]
            )
        ),
    )
    return AnthropicModel(state.client, model=model, price=price_of(model, prices), url_source=source, **keywords)


@hookimpl
def register_models(register):  # type: ignore[no-untyped-def]
    register("anthropic", make_anthropic)


@hookimpl
def configure(runtime):  # type: ignore[no-untyped-def]
    preload_when_chosen(runtime, "anthropic")
