"""Who may call the service: the token (a Bearer header, or the inspector's cookie) and, on loopback, the Host.

A pure ASGI middleware, so streamed responses (SSE turns, events, MCP) pass through untouched.
With a token, every request needs `Authorization: Bearer TOKEN` or the `thoth_token` cookie that
`GET /login?token=TOKEN` sets; anything else is 401. A service bound to a loopback address also
refuses a Host header that is not a loopback name (403), so a web page cannot reach it through DNS
rebinding. `/login` itself is open: it checks the token it is given.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "thoth_token"
OPEN_PATHS = frozenset({"/login"})
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})


def same_token(given: str | None, token: str) -> bool:
    """Whether given is the token (constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def presented_token(headers: dict[str, str]) -> str | None:
    """The token a request carries: its Bearer header, else its `thoth_token` cookie."""
    authorization = headers.get("authorization", "")
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except Exception:  # noqa: BLE001 - a malformed cookie header is no token
        return None
    morsel = cookie.get(COOKIE)
    return morsel.value if morsel else None


def host_name(host: str) -> str:
    """The Host header without its port."""
    if host.startswith("["):
        return host.split("]")[0] + "]"
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class Guard:
    """The ASGI middleware that applies the token and loopback Host rules."""

    def __init__(self, app: ASGIApp, *, token: str | None, loopback: bool) -> None:
        self.app = app
        self.token = token
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        problem: tuple[int, str] | None = None
        if self.loopback and host_name(headers.get("host", "127.0.0.1")) not in LOOPBACK_NAMES:
            problem = 403, f"Host {headers.get('host')!r} refused: this service answers loopback names only"
        elif self.token and scope.get("path") not in OPEN_PATHS:
            if not same_token(presented_token(headers), self.token):
                problem = 401, "unauthorized: send Authorization: Bearer TOKEN (the service's token)"
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008, "reason": problem[1]})
        else:
            await refuse(send, *problem)


async def refuse(send: Send, status: int, message: str) -> None:
    """Answer {"error": message} with this status."""
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if status == 401:
        headers.append((b"www-authenticate", b"Bearer"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


__all__ = ["COOKIE", "Guard", "presented_token", "same_token"]
