"""A fake Anthropic Messages API on 127.0.0.1 for offline tests of anything that calls Claude.

It speaks the real wire format, so the real `anthropic` SDK (pointed at `fake.url` through
`base_url` or `ANTHROPIC_BASE_URL`) parses it: `POST /v1/messages` as JSON or as server-sent
events (message_start, content_block_start, ping, content_block_delta, content_block_stop,
message_delta, message_stop), and `POST /v1/messages/count_tokens`. The key may come as
`x-api-key` or `Authorization: Bearer`; `anthropic-version` is required, as upstream.

Scripting, through the `fake_anthropic` fixture:
- `fake.replies = ["Hi!", {"match": "weather", "reply": "Sunny."}]`: the first rule whose
  `match` (a regular expression searched in the last user text) fits answers; a rule may have
  `tool_use` ({"name", "input"}) to call a tool (after its text, if any), `once` (used up after one answer),
  `delay` (seconds between streamed pieces), `pause` (a `threading.Event` the stream waits
  for after its first delta, to prove a client shows text before the reply is complete),
  `stall` (seconds the stream waits after its last text delta, before its end events, so a
  test can kill a client that has shown the whole reply but not seen the stream end).
  `fake.replies` may also be a callable body -> str | dict. When the request forces a tool
  (`tool_choice` `{"type": "tool", "name": ...}`, as for a structured answer), a reply that is a
  JSON object comes back as that tool's call; any other reply stays text, to script a bad answer.
  When the request forbids tools (`tool_choice` `{"type": "none"}`), a rule's `tool_use` is
  dropped: the answer is its text only, `DEFAULT_REPLY` when it has none.
- `fake.fail_with(529, times=2)` answers the next 2 requests with that status (all of them
  without `times`), with the real error body and a short `retry-after`; `mid_stream=True`
  sends an SSE `error` event after the first delta instead. `fake.slow = 2.0` waits that long
  before answering. `fake.api_key = "k"` answers 401 to any other key.
  `fake.requests` records every request (path, headers, JSON body, `.api_key`).

A test of something that talks to Claude:

    async def test_reply(fake_anthropic, make_runtime):
        fake_anthropic.replies = ["Hi Ann!"]
        models = {"anthropic": {"base_url": fake_anthropic.url, "api_key": "test-key"}}
        runtime = make_runtime({...}, config={"thoth": {"model": "anthropic"}, "models": models})
        assert (await runtime.turn("hi", peer="ann", thread="t")).reply.text == "Hi Ann!"
        assert "cache_control" in fake_anthropic.messages_requests[-1].body["system"][0]  # a stable block
        await runtime.aclose()

A subprocess (`thoth ask`) gets `ANTHROPIC_BASE_URL=fake.url` and any `ANTHROPIC_API_KEY`.
Token counts are estimates (four characters a token). The fake caches any prefix that ends in
a `cache_control` block: the first request reports it as a cache write, later ones as a read.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DEFAULT_REPLY", "FakeAnthropic", "RecordedRequest"]

DEFAULT_REPLY = "Hello from the fake Messages API."

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
ERROR_MESSAGES = {
    401: "invalid x-api-key",
    429: "Number of request tokens has exceeded your rate limit",
    529: "Overloaded",
}

Rule = str | dict[str, Any]


@dataclass
class RecordedRequest:
    """One request the fake received."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api_key(self) -> str | None:
        """The key sent as x-api-key or Authorization: Bearer."""
        bearer = self.headers.get("authorization", "")
        return self.headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else None)


@dataclass
class _Failure:
    status: int
    times: int | None
    retry_after: float
    mid_stream: bool


@dataclass
class FakeAnthropic:
    """The server's state; start() binds an ephemeral port, stop() shuts it down."""

    replies: list[Rule] | Callable[[dict[str, Any]], Rule] = field(default_factory=list)
    api_key: str | None = None
    slow: float = 0.0
    requests: list[RecordedRequest] = field(default_factory=list)
    _failure: _Failure | None = None
    _cache: set[str] = field(default_factory=set)
    _server: ThreadingHTTPServer | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """The base URL to give the SDK."""
        assert self._server is not None, "the fake is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def messages_requests(self) -> list[RecordedRequest]:
        """The recorded POST /v1/messages requests (not count_tokens)."""
        return [r for r in self.requests if r.path == "/v1/messages"]

    def fail_with(
        self, status: int, *, times: int | None = None, retry_after: float = 0.01, mid_stream: bool = False
    ) -> None:
        """Answer the next `times` requests (all, if None) with an API error of this status."""
        self._failure = _Failure(status, times, retry_after, mid_stream)

    def recover(self) -> None:
        """Stop failing."""
        self._failure = None

    def start(self) -> FakeAnthropic:
        """Serve on 127.0.0.1 with an ephemeral port, in a daemon thread."""
        fake = self

        class Handler(_Handler):
            state = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-anthropic", daemon=True
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

    # --- behaviour ----------------------------------------------------------------------

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
        last = last_user_text(body)
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

    def usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Input token counts, with the cached prefix reported as a cache write or read."""
        parts = [json.dumps(t, sort_keys=True) for t in body.get("tools", [])]
        system = body.get("system", [])
        parts += [system] if isinstance(system, str) else [json.dumps(b, sort_keys=True) for b in system]
        parts += [json.dumps(m, sort_keys=True) for m in body.get("messages", [])]
        marked = [i for i, part in enumerate(parts) if '"cache_control"' in part]
        total = estimate_tokens("".join(parts))
        if not marked:
            return {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        prefix = "".join(parts[: marked[-1] + 1])
        cached = estimate_tokens(prefix)
        key = hashlib.sha256(f"{body.get('model')}\0{prefix}".encode()).hexdigest()
        with self._lock:
            hit = key in self._cache
            self._cache.add(key)
        return {
            "input_tokens": max(total - cached, 1),
            "cache_creation_input_tokens": 0 if hit else cached,
            "cache_read_input_tokens": cached if hit else 0,
        }


def estimate_tokens(text: str) -> int:
    """About four characters a token."""
    return max(1, len(text) // 4)


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the last user message (tool results included)."""
    for message in reversed(body.get("messages", [])):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = []
        for block in content or []:
            inner = block.get("content", block.get("text", ""))
            texts.append(inner if isinstance(inner, str) else " ".join(b.get("text", "") for b in inner))
        return " ".join(texts)
    return ""


def error_body(status: int, message: str | None = None) -> dict[str, Any]:
    """The API's error JSON for a status."""
    kind = ERROR_TYPES.get(status, "api_error")
    text = message or ERROR_MESSAGES.get(status, kind.replace("_", " "))
    return {"type": "error", "error": {"type": kind, "message": text}, "request_id": f"req_{uuid.uuid4().hex[:24]}"}


def forced_tool(body: dict[str, Any]) -> str | None:
    """The tool a request forces through `tool_choice: {"type": "tool", "name": ...}`, if any."""
    choice = body.get("tool_choice")
    return str(choice.get("name")) if isinstance(choice, dict) and choice.get("type") == "tool" else None


def reply_content(rule: dict[str, Any], forced: str | None = None) -> list[dict[str, Any]]:
    """The content blocks of a scripted answer; under a forced tool, a JSON object reply is that tool's input."""
    if forced and not rule.get("tool_use"):
        try:
            value = json.loads(re.sub(r"^\s*```(?:json)?\s*|\s*```\s*$", "", str(rule.get("reply", ""))))
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            return [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:24]}", "name": forced, "input": value}]
    blocks: list[dict[str, Any]] = []
    if rule.get("reply"):
        blocks.append({"type": "text", "text": str(rule["reply"])})
    if rule.get("tool_use"):
        call = rule["tool_use"]
        blocks.append(
            {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": call["name"],
                "input": call.get("input", {}),
            }
        )
    return blocks or [{"type": "text", "text": ""}]


def message_json(
    body: dict[str, Any], content: list[dict[str, Any]], usage: dict[str, int], output_tokens: int
) -> dict[str, Any]:
    """A whole Message object, as the non-streaming endpoint returns it."""
    stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "claude-fake"),
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": dict(usage, output_tokens=output_tokens),
    }


def stream_events(message: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The server-sent events that stream a Message, in the API's order."""
    start = dict(message, content=[], stop_reason=None, usage=dict(message["usage"], output_tokens=1))
    yield "message_start", {"type": "message_start", "message": start}
    for index, block in enumerate(message["content"]):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}},
            )
            if index == 0:
                yield "ping", {"type": "ping"}
            for piece in re.findall(r"\S+\s*|\s+", block["text"]):
                yield (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": piece}},
                )
        else:
            yield (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": dict(block, input={})},
            )
            raw = json.dumps(block["input"])
            for cut in range(0, len(raw), 16):
                yield (
                    "content_block_delta",
                    {
                        "type": "content_block_delta",
                        "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": raw[cut : cut + 16]},
                    },
                )
        yield "content_block_stop", {"type": "content_block_stop", "index": index}
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield (
        "message_delta",
        {"type": "message_delta", "delta": delta, "usage": {"output_tokens": message["usage"]["output_tokens"]}},
    )
    yield "message_stop", {"type": "message_stop"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeAnthropic

    def setup(self) -> None:
        """Send each event at once (no Nagle delay), as a streaming API must."""
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        """Quiet: tests read `fake.requests` instead."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        """Route /v1/messages and /v1/messages/count_tokens."""
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            return self._json(400, error_body(400, "request body is not valid JSON"))
        path = self.path.split("?")[0]
        recorded = RecordedRequest("POST", path, {k.lower(): v for k, v in self.headers.items()}, body)
        fake = self.state
        fake.requests.append(recorded)
        if fake.slow and fake.stopped_within(fake.slow):
            return
        if path not in ("/v1/messages", "/v1/messages/count_tokens"):
            return self._json(404, error_body(404, f"no route {path}"))
        if not recorded.api_key or (fake.api_key is not None and recorded.api_key != fake.api_key):
            return self._json(401, error_body(401))
        if not recorded.headers.get("anthropic-version"):
            return self._json(400, error_body(400, "anthropic-version: header is required"))
        if not body.get("model") or not isinstance(body.get("messages"), list):
            return self._json(400, error_body(400, "model and messages are required"))
        failure = fake.take_failure()
        if failure is not None and not failure.mid_stream:
            headers = {
                "retry-after": str(max(1, round(failure.retry_after))),
                "retry-after-ms": str(int(failure.retry_after * 1000)),
            }
            return self._json(failure.status, error_body(failure.status), headers)
        usage = fake.usage(body)
        if path.endswith("count_tokens"):
            return self._json(200, {"input_tokens": sum(usage.values())})
        rule = fake.pick(body)
        if (body.get("tool_choice") or {}).get("type") == "none":  # no tool calls: the rule's text only
            rule = {k: v for k, v in rule.items() if k != "tool_use"} | {"reply": rule.get("reply") or DEFAULT_REPLY}
        content = reply_content(rule, forced_tool(body))
        output = sum(estimate_tokens(b.get("text") or json.dumps(b.get("input"))) for b in content)
        message = message_json(body, content, usage, output)
        if not body.get("stream"):
            return self._json(200, message)
        self._stream(
            message,
            delay=float(rule.get("delay", 0)),
            pause=rule.get("pause"),
            failure=failure,
            stall=float(rule.get("stall", 0)),
        )

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", str(payload.get("request_id") or f"req_{uuid.uuid4().hex[:24]}"))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _stream(
        self,
        message: dict[str, Any],
        *,
        delay: float,
        pause: threading.Event | None,
        failure: _Failure | None,
        stall: float = 0.0,
    ) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
        self.end_headers()
        deltas = 0
        try:
            for event, data in stream_events(message):
                if failure is not None and deltas == 1:
                    self._chunk("error", error_body(failure.status))
                    break
                if event == "message_delta" and stall and self.state.stopped_within(stall):
                    break
                self._chunk(event, data)
                if event == "content_block_delta":
                    deltas += 1
                    if pause is not None and deltas == 1:
                        pause.wait(10)
                    if delay and self.state.stopped_within(delay):
                        break
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _chunk(self, event: str, data: dict[str, Any]) -> None:
        payload = f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()
