"""Test helpers for the Slack frontend: fake Slack servers on 127.0.0.1 and signed inbound requests.

The Web API fake speaks Slack's wire format (form or JSON bodies, `{"ok": true, ...}`
answers) so the real `WebClient` talks to it unchanged. The Socket Mode fake is a real
websocket server: it greets with `hello`, pushes envelopes and records the client's acks.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode

from slack_bolt import BoltRequest
from slack_sdk.signature import SignatureVerifier

from .bridge import SlackBridge

BOT_USER, BOT_ID, TEAM = "UBOT", "BBOT", "T1"
SECRET = "test-signing-secret"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # the default 5 drops bursts of connections


class FakeSlackAPI:
    """A fake Web API: answers the methods the bridge uses and records (method, params, headers)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], dict[str, str]]] = []
        self.socket_url = ""
        self.rate_limited: dict[str, int] = {}  # method -> how many next calls get 429
        self.errors: dict[str, str] = {}  # method -> the Slack error it answers, e.g. invalid_auth
        self.dropped: dict[str, int] = {}  # method -> how many next calls get no answer (connection closed)
        self.refused: list[str] = []
        self.admins: set[str] = set()  # users `users.info` calls admins of TEAM
        self._lock = threading.Condition()
        self._counter = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                if "json" in (self.headers.get("Content-Type") or ""):
                    params = json.loads(raw or "{}")
                else:
                    params = dict(parse_qsl(raw))
                    for key in ("blocks", "attachments"):
                        if isinstance(params.get(key), str):
                            params[key] = json.loads(params[key])
                method = self.path.rsplit("/", 1)[-1]
                if fake.drop(method):
                    self.close_connection = True  # a network failure: no status line, no body
                    return
                status, answer = fake.respond(method, params, dict(self.headers))
                body = json.dumps(answer).encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", "0")
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/api/"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def drop(self, method: str) -> bool:
        """True if this call of `method` is to be dropped (counting down `dropped[method]`)."""
        with self._lock:
            if self.dropped.get(method, 0) <= 0:
                return False
            self.dropped[method] -= 1
            self.refused.append(method)
            return True

    def respond(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        """The HTTP status and body: 429 while `rate_limited[method]` counts down; `errors[method]` as Slack errors."""
        with self._lock:
            if self.rate_limited.get(method, 0) > 0:
                self.rate_limited[method] -= 1
                self.refused.append(method)
                return 429, {"ok": False, "error": "ratelimited"}
            if method in self.errors:
                self.refused.append(method)
                return 200, {"ok": False, "error": self.errors[method]}
        return 200, self.answer(method, params, headers)

    def answer(self, method: str, params: dict[str, Any], headers: dict[str, str]) -> dict[str, Any]:
        """Record the call and answer it the way Slack would."""
        with self._lock:
            self._counter += 1
            ts = f"{1700000000 + self._counter}.{self._counter:06d}"
            if method == "chat.postMessage":
                params["_ts"] = ts  # the ts this fake gave the message
            self.calls.append((method, params, headers))
            self._lock.notify_all()
        if method == "auth.test":
            return {
                "ok": True,
                "user_id": BOT_USER,
                "bot_id": BOT_ID,
                "team_id": TEAM,
                "user": "thoth",
                "team": "Test",
                "url": "https://test.slack.com/",
            }
        if method == "chat.postMessage":
            return {
                "ok": True,
                "channel": params.get("channel"),
                "ts": ts,
                "message": {"text": params.get("text"), "ts": ts},
            }
        if method == "chat.update":
            return {"ok": True, "channel": params.get("channel"), "ts": params.get("ts"), "text": params.get("text")}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": ts}
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": "D" + str(params.get("users", "")).lstrip("U")}}
        if method == "users.info":
            user = str(params.get("user"))
            return {
                "ok": True,
                "user": {"id": user, "team_id": TEAM, "is_admin": user in self.admins, "is_owner": False},
            }
        if method == "apps.connections.open":
            return {"ok": True, "url": self.socket_url}
        return {"ok": True}

    def calls_to(self, method: str) -> list[dict[str, Any]]:
        """The params of every call to one method, in order."""
        with self._lock:
            return [params for name, params, _ in self.calls if name == method]

    def wait_for(self, method: str, predicate: Any = lambda params: True, timeout: float = 30) -> dict[str, Any]:
        """The first call to method whose params satisfy predicate, waiting for it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for name, params, _ in self.calls:
                    if name == method and predicate(params):
                        return params
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(
                        f"no {method} call matched within {timeout}s; calls: {[c[0] for c in self.calls]}"
                    )
                self._lock.wait(left)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class FakeSocketMode:
    """A websocket server speaking Slack's Socket Mode envelope protocol."""

    def __init__(self) -> None:
        import websockets  # a test dependency

        self.loop = asyncio.new_event_loop()
        self.acks: list[dict[str, Any]] = []
        self.connected = threading.Event()
        self._sockets: list[Any] = []
        threading.Thread(target=self.loop.run_forever, daemon=True).start()

        async def serve() -> Any:
            return await websockets.serve(self._serve, "127.0.0.1", 0)

        self.server = asyncio.run_coroutine_threadsafe(serve(), self.loop).result(10)
        port = self.server.sockets[0].getsockname()[1]
        self.url = f"ws://127.0.0.1:{port}/link/?ticket={uuid.uuid4().hex}"

    async def _serve(self, socket: Any) -> None:
        self._sockets.append(socket)
        await socket.send(
            json.dumps(
                {
                    "type": "hello",
                    "num_connections": 1,
                    "connection_info": {"app_id": "A1"},
                    "debug_info": {"host": "fake"},
                }
            )
        )
        self.connected.set()
        try:
            async for message in socket:
                self.acks.append(json.loads(message))
        except Exception:  # noqa: BLE001 - the client hung up without a close frame
            pass

    def wait_for_connections(self, count: int, timeout: float = 60) -> bool:
        """Whether `count` clients are connected (several workers each open their own), waiting for them."""
        deadline = time.monotonic() + timeout
        while len(self._sockets) < count:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def push(self, payload: dict[str, Any], kind: str = "events_api", *, connection: int = -1) -> str:
        """Send one envelope to a connected client (the newest, or the `connection`-th); returns its envelope_id."""
        envelope_id = uuid.uuid4().hex
        envelope = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            "accepts_response_payload": kind != "events_api",
            "retry_attempt": 0,
            "retry_reason": "",
        }
        assert self.connected.wait(30), "the Socket Mode client never connected"
        socket = self._sockets[connection]
        asyncio.run_coroutine_threadsafe(socket.send(json.dumps(envelope)), self.loop).result(10)
        return envelope_id

    def wait_for_ack(self, envelope_id: str, timeout: float = 30) -> dict[str, Any]:
        """The client's ack of one envelope."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for ack in list(self.acks):
                if ack.get("envelope_id") == envelope_id:
                    return ack
            time.sleep(0.01)
        raise AssertionError(f"envelope {envelope_id} was never acknowledged; acks: {self.acks}")

    def close(self) -> None:
        """Stop the server and its loop."""
        self.server.close()
        asyncio.run_coroutine_threadsafe(self.server.wait_closed(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)


def signed(
    body: str, *, content_type: str = "application/json", timestamp: int | None = None, secret: str = SECRET
) -> BoltRequest:
    """An inbound HTTP request, signed the way Slack signs it."""
    ts = str(int(time.time()) if timestamp is None else timestamp)
    signature = str(SignatureVerifier(secret).generate_signature(timestamp=ts, body=body))
    return BoltRequest(
        body=body,
        headers={"content-type": [content_type], "x-slack-request-timestamp": [ts], "x-slack-signature": [signature]},
    )


def event_body(event: dict[str, Any], *, team: str = TEAM) -> dict[str, Any]:
    """An Events API envelope around one event."""
    return {
        "token": "legacy",
        "team_id": team,
        "api_app_id": "A1",
        "type": "event_callback",
        "event": event,
        "event_id": "Ev" + uuid.uuid4().hex[:10],
        "event_time": int(time.time()),
    }


def mention(
    text: str,
    *,
    user: str = "UANN",
    channel: str = "CGENERAL",
    ts: str = "1700000000.000100",
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """An app_mention event: a person wrote `@Thoth text` in a channel."""
    event = {"type": "app_mention", "user": user, "text": f"<@UBOT> {text}", "channel": channel, "ts": ts, "team": TEAM}
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event


def dm(
    text: str, *, user: str = "UANN", channel: str = "DANN", ts: str = "1700000001.000100", **extra: Any
) -> dict[str, Any]:
    """A message event in a direct message with the agent."""
    return {
        "type": "message",
        "channel_type": "im",
        "user": user,
        "text": text,
        "channel": channel,
        "ts": ts,
        "team": TEAM,
        **extra,
    }


def again(request: BoltRequest) -> BoltRequest:
    """The same request byte for byte, signature included: a replay (or a redelivery) of it."""
    return BoltRequest(body=request.raw_body, headers={k: list(v) for k, v in request.headers.items()})


def button_press(action_id: str, item_id: str, *, user: str, channel: str, ts: str, team: str = TEAM) -> BoltRequest:
    """A signed block_actions request: a person pressed a card's button (a new trigger_id and action_ts each time)."""
    payload = {
        "type": "block_actions",
        "team": {"id": team},
        "user": {"id": user},
        "api_app_id": "A1",
        "trigger_id": f"{int(time.time())}.{uuid.uuid4().hex[:20]}",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "channel": {"id": channel},
        "message": {"ts": ts, "text": item_id},
        "response_url": "http://127.0.0.1:9/unused",
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": "thoth_decision",
                "value": item_id,
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return signed(urlencode({"payload": json.dumps(payload)}), content_type="application/x-www-form-urlencoded")


class Harness:
    """A running bridge, its runtime and the fake Web API, with helpers to send it requests."""

    def __init__(self, bridge: SlackBridge, fake: FakeSlackAPI) -> None:
        self.bridge, self.fake, self.runtime = bridge, fake, bridge.runtime

    def send(self, event: dict[str, Any], *, team: str = TEAM, wait: bool = True) -> Any:
        """Dispatch a signed event; by default wait until the work it started is done."""
        return self.dispatch(signed(json.dumps(event_body(event, team=team))), wait=wait)

    def dispatch(self, request: BoltRequest, *, wait: bool = True) -> Any:
        """Dispatch a request as it is (e.g. one built by `signed` or `again`); by default wait for its work."""
        response = self.bridge.app.dispatch(request)
        if wait:
            self.bridge.loop.join()
        return response

    def click(self, action_id: str, item_id: str, *, user: str, channel: str, ts: str) -> Any:
        """A signed block_actions request: a person pressed a card's button."""
        return self.dispatch(button_press(action_id, item_id, user=user, channel=channel, ts=ts))

    def react(self, name: str, *, user: str, channel: str, ts: str) -> Any:
        """A person added a reaction to a message."""
        return self.send(
            {
                "type": "reaction_added",
                "user": user,
                "reaction": name,
                "item_user": "UBOT",
                "item": {"type": "message", "channel": channel, "ts": ts},
                "event_ts": "1",
            }
        )

    def replies(self, channel: str, thread_ts: str | None = None) -> list[str]:
        """The final text of each reply the agent posted in a thread (placeholder + updates)."""
        posted = [
            p
            for p in self.fake.calls_to("chat.postMessage")
            if p["channel"] == channel and p.get("thread_ts") == thread_ts
        ]
        return [self.final_text(channel, p) for p in posted]

    def final_text(self, channel: str, post: dict[str, Any]) -> str:
        """A posted message's text after its last chat.update."""
        updates = [
            u["text"] for u in self.fake.calls_to("chat.update") if u["channel"] == channel and u["ts"] == post["_ts"]
        ]
        return updates[-1] if updates else post["text"]

    def call(self, coro: Any) -> Any:
        """Run a coroutine on the bridge's loop (where the runtime lives) and wait for it."""
        return self.bridge.loop.call(coro)
