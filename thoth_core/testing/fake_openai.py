"""A fake OpenAI Chat Completions API on 127.0.0.1 for offline tests of the `openai` provider.

It speaks the real wire format, so the real `openai` SDK (pointed at `fake.url` through
`base_url` or `OPENAI_BASE_URL`) parses it: `POST /v1/chat/completions` as JSON or, with
`"stream": true`, as server-sent events (`data: {chunk}` lines ending with `data: [DONE]`;
text deltas, tool-call deltas split in pieces, a finish reason, and a usage chunk with empty
`choices` when `stream_options.include_usage` is set), and `GET /v1/models`. The key comes as
`Authorization: Bearer`; errors carry the API's JSON body, `{"error": {"message", "type", ...}}`.

Scripting, through the `fake_openai` fixture (the same rules as `fake_anthropic`):
- `fake.replies = ["Hi!", {"match": "weather", "reply": "Sunny."}]`: the first rule whose
  `match` (a regular expression searched in the last user or tool message) fits answers; a rule
  may have `tool_call` ({"name", "arguments"}: a dict or a JSON string) to call a tool after its
  text, `once`, `delay` (seconds between streamed pieces), `pause` (a `threading.Event` the stream
  waits for after its first text delta); `fake.replies` may also be a callable body -> str | dict.
  When the request forbids tools (`tool_choice: "none"`), a rule's `tool_call` is dropped: the
  answer is its text only, `DEFAULT_REPLY` when it has none.
- `fake.fail_with(500, times=2)` answers the next 2 requests with that status (all without
  `times`) and a short `retry-after-ms`; `fake.slow = 2.0` waits that long before answering;
  `fake.api_key = "k"` answers 401 to any other key (without it any key, or none, is accepted,
  as a local server does). `fake.models` is what `GET /v1/models` lists.
  `fake.requests` records every request (`.path`, `.headers`, `.body`, `.api_key`).

    async def test_reply(fake_openai, make_runtime):
        fake_openai.replies = ["Hi Ann!"]
        models = {"openai": {"base_url": fake_openai.url, "model": "llama3.2"}}
        runtime = make_runtime({}, config={"thoth": {"model": "openai"}, "models": models})
        assert (await runtime.turn("hi", peer="ann", thread="t")).reply.text == "Hi Ann!"

Token counts are estimates (four characters a token).
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from thoth_core.testing.fake_anthropic import RecordedRequest, _Failure, estimate_tokens

__all__ = ["DEFAULT_REPLY", "FakeOpenAI", "error_body"]

DEFAULT_REPLY = "Hello from the fake Chat Completions API."
ERRORS = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided"),
    403: ("invalid_request_error", "unsupported_country_region_territory", "Country not supported"),
    404: ("invalid_request_error", "model_not_found", "The model does not exist or you do not have access to it."),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: ("server_error", None, "The server had an error while processing your request."),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}

Rule = str | dict[str, Any]


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """The API's error JSON for a status."""
    kind, code, text = ERRORS.get(status, ("server_error", None, f"error {status}"))
    return {"error": {"message": message or text, "type": kind, "param": None, "code": code}}


@dataclass
class FakeOpenAI:
    """The server's state; start() binds an ephemeral port, stop() shuts it down."""

    replies: list[Rule] | Callable[[dict[str, Any]], Rule] = field(default_factory=list)
    api_key: str | None = None
    slow: float = 0.0
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    requests: list[RecordedRequest] = field(default_factory=list)
    _failure: _Failure | None = None
    _server: ThreadingHTTPServer | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The base URL to give the SDK (ending in `/v1`, as for a local server)."""
        assert self._server is not None, "the fake is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def completions(self) -> list[RecordedRequest]:
        """The recorded POST /v1/chat/completions requests."""
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def fail_with(self, status: int, *, times: int | None = None, retry_after: float = 0.01) -> None:
        """Answer the next `times` requests (all, if None) with an API error of this status."""
        self._failure = _Failure(status, times, retry_after, mid_stream=False)

    def start(self) -> FakeOpenAI:
        """Serve on 127.0.0.1 with an ephemeral port, in a daemon thread."""
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True
        ).start()
        return self

    def stopped_within(self, seconds: float) -> bool:
        """Wait up to `seconds` (a slow or stalled answer); whether the fake was stopped meanwhile."""
        return self._stopping.wait(seconds)

    def stop(self) -> None:
        """Shut the server down, waking any slow handler."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    def take_failure(self) -> _Failure | None:
        """The failure to apply to this request, counting it down."""
        with self._lock:
            failure = self._failure
            if failure is not None and failure.times is not None:
                failure.times -= 1
                if failure.times <= 0:
                    self._failure = None
            return failure

    def pick(self, body: dict[str, Any]) -> dict[str, Any]:
        """The scripted answer for a request body, as a rule dict."""
        if callable(self.replies):
            rule = self.replies(body)
            return {"reply": rule} if isinstance(rule, str) else dict(rule)
        last = last_text(body)
        with self._lock:
            for rule in self.replies:
                if isinstance(rule, str):
                    return {"reply": rule}
                if "match" in rule and not re.search(rule["match"], last, re.IGNORECASE):
                    continue
                if rule.get("once"):
                    self.replies.remove(rule)
                return dict(rule)
        return {"reply": DEFAULT_REPLY}


def last_text(body: dict[str, Any]) -> str:
    """The text of the last user or tool message."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") not in ("user", "tool"):
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        return " ".join(part.get("text", "") for part in content or [] if isinstance(part, dict))
    return ""


def tool_calls(rule: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool calls of a scripted answer, as the API returns them."""
    call = rule.get("tool_call")
    if not call:
        return []
    arguments = call.get("arguments", {})
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {
                "name": call["name"],
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }
    ]


def usage_of(body: dict[str, Any], reply: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """Estimated token counts of a request and its answer."""
    prompt = estimate_tokens(json.dumps(body.get("messages", [])) + json.dumps(body.get("tools", [])))
    completion = estimate_tokens(reply + json.dumps(calls)) if reply or calls else 0
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
    }


def chunk(body: dict[str, Any], completion_id: str, choices: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """One `chat.completion.chunk` object."""
    return {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "system_fingerprint": None,
        "choices": choices,
        **extra,
    }


def stream_chunks(body: dict[str, Any], reply: str, calls: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """The chunks that stream an answer, in the API's order."""
    completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"

    def delta(content: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return chunk(body, completion_id, [{"index": 0, "delta": content, "logprobs": None, "finish_reason": finish}])

    yield delta({"role": "assistant", "content": ""})
    for piece in re.findall(r"\S+\s*|\s+", reply):
        yield delta({"content": piece})
    for index, call in enumerate(calls):
        head = {"index": index, "id": call["id"], "type": "function"}
        yield delta({"tool_calls": [dict(head, function={"name": call["function"]["name"], "arguments": ""})]})
        raw = call["function"]["arguments"]
        for cut in range(0, len(raw), 12):
            yield delta({"tool_calls": [{"index": index, "function": {"arguments": raw[cut : cut + 12]}}]})
    yield delta({}, "tool_calls" if calls else "stop")
    if (body.get("stream_options") or {}).get("include_usage"):
        yield chunk(body, completion_id, [], usage=usage_of(body, reply, calls))


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeOpenAI

    def setup(self) -> None:
        """Send each chunk at once (no Nagle delay), as a streaming API must."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: tests read `fake.requests` instead."""

    def _admit(self, body: dict[str, Any]) -> RecordedRequest | None:
        """Record the request; answer slowness, auth and scripted failures; None when answered."""
        path = self.path.split("?")[0]
        recorded = RecordedRequest(self.command, path, {k.lower(): v for k, v in self.headers.items()}, body)
        fake = self.state
        fake.requests.append(recorded)
        if fake.slow and fake.stopped_within(fake.slow):
            return None
        if fake.api_key is not None and recorded.api_key != fake.api_key:
            message = f"Incorrect API key provided: {str(recorded.api_key)[:6]}***."
            self._json(401, error_body(401, message))
            return None
        failure = fake.take_failure()
        if failure is not None:
            headers = {"retry-after-ms": str(int(failure.retry_after * 1000))}
            self._json(failure.status, error_body(failure.status), headers)
            return None
        return recorded

    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        """Route GET /v1/models."""
        if self._admit({}) is None:
            return
        if self.path.split("?")[0] != "/v1/models":
            return self._json(404, error_body(404, f"Invalid URL (GET {self.path})"))
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "fake"} for m in self.state.models]
        self._json(200, {"object": "list", "data": data})

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        """Route POST /v1/chat/completions."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return self._json(400, error_body(400, "We could not parse the JSON body of your request."))
        if self._admit(body) is None:
            return
        if self.path.split("?")[0] != "/v1/chat/completions":
            return self._json(404, error_body(404, f"Invalid URL (POST {self.path})"))
        if not body.get("model") or not isinstance(body.get("messages"), list) or not body["messages"]:
            return self._json(400, error_body(400, "you must provide a model parameter and messages"))
        rule = self.state.pick(body)
        if body.get("tool_choice") == "none":  # no tool calls: the rule's text only
            rule = {k: v for k, v in rule.items() if k != "tool_call"} | {"reply": rule.get("reply") or DEFAULT_REPLY}
        reply, calls = str(rule.get("reply", "")), tool_calls(rule)
        if body.get("stream"):
            delay, pause = float(rule.get("delay", 0)), rule.get("pause")
            return self._stream(stream_chunks(body, reply, calls), delay=delay, pause=pause)
        message: dict[str, Any] = {"role": "assistant", "content": reply or None, "refusal": None}
        if calls:
            message["tool_calls"] = calls
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": "tool_calls" if calls else "stop"}
        completion = chunk(body, f"chatcmpl-{uuid.uuid4().hex[:24]}", [choice], usage=usage_of(body, reply, calls))
        self._json(200, dict(completion, object="chat.completion"))

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:24]}")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: Iterator[dict[str, Any]], *, delay: float, pause: threading.Event | None) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("x-request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        try:
            texts = 0
            for data in chunks:
                self._send(f"data: {json.dumps(data)}\n\n")
                texts += any(c["delta"].get("content") for c in data["choices"])
                if pause is not None and texts == 1:
                    pause.wait(10)
                    pause = None
                if delay and self.state.stopped_within(delay):
                    break
            self._send("data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _send(self, text: str) -> None:
        payload = text.encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()
