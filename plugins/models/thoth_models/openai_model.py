"""The `openai` provider: any OpenAI-compatible Chat Completions server through the official SDK.

The OpenAI API itself, or a local server speaking its wire format (Ollama, vLLM, LM Studio,
llama.cpp's llama-server). Options, all in `[models.openai]` of thoth.toml:
- `model` (default `gpt-4.1-mini`), `max_tokens` (default `[thoth] max_tokens`);
- `base_url`: default `OPENAI_BASE_URL`, else the public API;
- `api_key`: a reference such as `{ "$env" = "MY_KEY" }`; default `OPENAI_API_KEY`. A server
  other than api.openai.com may need no key: without one, a placeholder is sent;
- `timeout` (default 60 seconds per attempt; while streaming, between two chunks),
  `max_retries` (default 2: the SDK retries 408, 409, 429 and 5xx, honouring retry-after),
  `max_tool_rounds` (default 8: a backstop; `[thoth] tool_calls` bounds a turn),
  `prices` (`{ input = 0.4, output = 1.6 }` dollars per million tokens).

Replies stream with `stream_options.include_usage`, so the last chunk carries the usage. Tools
come in Anthropic's shape (`name`, `description`, `input_schema`, optional `handler`) and go as
`function` tools; calls with handlers are run and answered, as the `anthropic` provider does:
after `max_tool_rounds` rounds, or a round that hit `ToolLimit`, one more request goes with
`tool_choice: "none"`, so the reply ends with an answer. A tool of another `type` (Anthropic's
`memory_20250818`) is not sent. A request with an `answer` schema sends it as `response_format`
(`json_schema`, not strict). The public API gets `max_completion_tokens`, other servers the
older `max_tokens` they all accept. When `openai` is the configured model, `configure` starts
importing the SDK on a thread.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

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
    import openai

    from thoth_core import Runtime

DEFAULT_MODEL = "gpt-4.1-mini"
PUBLIC_HOST = "api.openai.com"
LOCAL_KEY = "no-key-needed"  # local servers ignore the key, but the SDK wants one
CONFIG_DEFAULTS = {  # every key of [models.openai]; None: no default in the file
    "models.openai": {
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
CONFIG_SCHEMA = {"models.openai": OPTION_RULES}  # checked at start, not when the first turn builds the client
KEY_HELP = "OPENAI_API_KEY or [models.openai] api_key"
skipped_types: set[str] = set()  # tool types already logged as not sent
log = logging.getLogger(__name__)


def function_tool(tool: dict[str, Any]) -> dict[str, Any] | None:
    """An Anthropic-shaped tool definition as a Chat Completions function tool; None for another API's tool type."""
    kind = tool.get("type")
    if kind not in (None, "custom", "function"):
        if kind not in skipped_types:
            skipped_types.add(kind)
            log.debug("openai: tools of type %r are not sent (Chat Completions takes function tools)", kind)
        return None
    function = {"name": tool["name"], "parameters": tool.get("input_schema") or {"type": "object", "properties": {}}}
    if tool.get("description"):
        function["description"] = tool["description"]
    return {"type": "function", "function": function}


def one_line(text: str, limit: int = 300) -> str:
    """Whitespace collapsed, cut to a limit: error messages stay on one line."""
    return " ".join(str(text).split())[:limit]


class OpenAIModel(SDKModel):
    """Streams replies from a Chat Completions endpoint through an `AsyncOpenAI` client."""

    name = "openai"
    client: openai.AsyncOpenAI

    @property
    def public(self) -> bool:
        """Whether the client talks to the OpenAI API itself."""
        return urlparse(str(self.client.base_url)).hostname == PUBLIC_HOST

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Chat Completions parameters for a request (streamed, with usage)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system_text})
        messages += [{"role": m.role, "content": m.content} for m in request.messages if m.content]
        params: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "max_completion_tokens" if self.public else "max_tokens": self.max_tokens or request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        tools = [function for function in map(function_tool, request.tools) if function is not None]
        if tools:
            params["tools"] = tools
        if request.answer is not None:
            schema = {
                "name": answer_name(request.answer),
                "description": answer_description(request.answer),
                "schema": answer_schema(request.answer),
                "strict": False,
            }
            params["response_format"] = {"type": "json_schema", "json_schema": schema}
        return params

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Usage]:
        """Yield the reply's text deltas, then one Usage summed over tool rounds."""
        import openai

        params = self.params(request)
        handlers = self.tool_handlers(request)
        usage = Usage()
        try:
            spoke = limited = False
            for done in range(self.max_tool_rounds + 1):
                if "tools" in params and request.answer is None and (limited or done == self.max_tool_rounds):
                    params["tool_choice"] = "none"  # the last request: an answer with what the tools gave
                calls: dict[int, dict[str, str]] = {}
                text: list[str] = []
                async for chunk in await self.client.chat.completions.create(**params):
                    if chunk.usage is not None:
                        add_usage(usage, chunk.usage)
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta.content:
                            if spoke and not text:
                                yield "\n\n"  # text of an earlier round, before a tool call
                            spoke = True
                            text.append(delta.content)
                            yield delta.content
                        for call in delta.tool_calls or []:
                            add_call_delta(calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""}), call)
                ordered = [calls[i] for i in sorted(calls)]
                if (
                    params.get("tool_choice") == "none"
                    or not ordered
                    or not all(c["name"] in handlers for c in ordered)
                ):
                    break
                ran = [await answer_call(handlers[c["name"]], c) for c in ordered]
                limited = any(hit for _, hit in ran)
                results = [message for message, _ in ran]
                params["messages"] = [*params["messages"], assistant_turn("".join(text), ordered), *results]
        except openai.APIError as exc:
            raise self.error(exc) from exc
        usage.cost_usd = cost_of(usage, self.price)
        yield usage

    async def check(self) -> str:
        """For `thoth doctor`: list the server's models once, without retries; raises ModelError if unreachable."""
        import openai

        started = time.perf_counter()
        client = self.client.with_options(max_retries=0, timeout=min(self.timeout, 10.0))
        try:
            page = await client.models.list()
        except openai.APIError as exc:
            raise self.error(exc, retried=False) from exc
        listed = [m.id for m in page.data]
        note = "" if not listed or self.model in listed else f"; it lists {', '.join(listed[:5])}, not {self.model}"
        elapsed = (time.perf_counter() - started) * 1000
        return f"{self.model} reachable at {self.client.base_url} ({elapsed:.0f} ms{note})"

    def error(self, exc: openai.APIError, *, retried: bool = True) -> ModelError:
        """One clear line for an SDK error."""
        import openai

        status = getattr(exc, "status_code", None)
        in_stream = not isinstance(exc, (openai.APIStatusError, openai.APIConnectionError))  # not retried
        after = f" after {self.max_retries} retries" if retried and not in_stream and self.max_retries else ""
        where = f"{self.url_source} {self.client.base_url}"
        if isinstance(exc, openai.APITimeoutError):
            return ModelError(
                f"openai: no answer from {where} within {self.timeout:g}s{after}; raise [models.openai] timeout"
            )
        if isinstance(exc, openai.APIConnectionError):
            return ModelError(f"openai: cannot reach {where}: {one_line(str(exc.__cause__ or exc))}{after}")
        message = one_line(error_message(exc))
        if status == 401:
            return ModelError(f"openai: authentication failed (401: {message}) at {where}; check {KEY_HELP}")
        if status == 403:
            return ModelError(f"openai: permission denied (403: {message}); the key may not allow model {self.model}")
        if status == 404:
            return ModelError(
                f"openai: not found (404: {message}) at {where}; check [models.openai] model = {self.model!r}"
            )
        if status == 429:
            return ModelError(f"openai: rate limited (429){after}: {message}; try again shortly")
        if status in (400, 422):
            return ModelError(f"openai: request rejected ({status}): {message}")
        return ModelError(f"openai: API error ({status or 'in stream'}){after} from {where}: {message}")


def error_message(exc: Exception) -> str:
    """The message of an API error body (`{"error": {"message": ...}}` or the inner object)."""
    body = getattr(exc, "body", None)
    inner = body.get("error", body) if isinstance(body, dict) else None
    if isinstance(inner, dict) and inner.get("message"):
        return str(inner["message"])
    return str(getattr(exc, "message", exc))


def add_call_delta(entry: dict[str, str], call: Any) -> None:
    """Fold one streamed tool-call delta into the call it belongs to."""
    if call.id:
        entry["id"] = call.id
    if call.function is not None:
        entry["name"] += call.function.name or ""
        entry["arguments"] += call.function.arguments or ""


def assistant_turn(text: str, calls: list[dict[str, str]]) -> dict[str, Any]:
    """The assistant message that made these tool calls, as a request parameter."""
    return {
        "role": "assistant",
        "content": text or None,
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ],
    }


async def answer_call(handler: Callable[..., Any], call: dict[str, str]) -> tuple[dict[str, Any], bool]:
    """Run one tool call: its result (or error) as a `tool` message, and whether it hit the turn's tool limits."""
    try:
        tool_input = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError as exc:
        return {"role": "tool", "tool_call_id": call["id"], "content": f"invalid JSON arguments: {exc.msg}"}, False
    result, limited = await run_tool(handler, call["id"], tool_input)
    return {"role": "tool", "tool_call_id": call["id"], "content": result["content"]}, limited


def add_usage(total: Usage, usage: Any) -> None:
    """Add one response's usage (cached prompt tokens counted as cache reads) to a running total."""
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
    total.input_tokens += (usage.prompt_tokens or 0) - cached
    total.cache_read_tokens += cached
    total.output_tokens += usage.completion_tokens or 0


def make_openai(runtime: Runtime, options: dict[str, Any]) -> OpenAIModel:
    """Build the provider from `[models.openai]` and the OPENAI_* environment."""
    model = options.get("model", DEFAULT_MODEL)
    if not isinstance(model, str) or not model:
        raise runtime.config.error("models.openai.model", f"expected a model id, got {model!r}")
    url, source = base_url("openai", options, "OPENAI_BASE_URL", "OpenAI")
    if url is not None and (not isinstance(url, str) or urlparse(url).scheme not in ("http", "https")):
        raise runtime.config.error("models.openai.base_url", f"expected an http(s) URL, got {url!r}")
    api_key = options.get("api_key") or os.environ.get("OPENAI_API_KEY")
    if not api_key:
        if url is None or urlparse(url).hostname == PUBLIC_HOST:
            raise ModelNotConfigured(f'openai: no API key; set {KEY_HELP} = {{ "$env" = "VAR" }} in thoth.toml')
        api_key = LOCAL_KEY
    keywords, prices = common_options(runtime, options, "models.openai")

    import openai

    state = runtime.plugin_state(
        "openai",
        lambda: ClientState(
            openai.AsyncOpenAI(
                api_key=api_key, base_url=url, timeout=keywords["timeout"], max_retries=keywords["max_retries"]
            )
        ),
    )
    price = (float(prices["input"]), float(prices["output"])) if prices else None
    return OpenAIModel(state.client, model=model, price=price, url_source=source, **keywords)


@hookimpl
def register_models(register):  # type: ignore[no-untyped-def]
    register("openai", make_openai)


@hookimpl
def configure(runtime):  # type: ignore[no-untyped-def]
    preload_when_chosen(runtime, "openai")
