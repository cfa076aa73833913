"""A small in-memory Honcho server on 127.0.0.1 for tests and demos: the v3 routes the SDK calls.

It speaks the JSON shapes of `honcho-ai` 2.7 (workspaces, peers, sessions, messages,
conclusions, chat, representation, card), "derives" one explicit conclusion per message at
once (the real deriver batches; none for a message whose configuration turns reasoning off), and
can misbehave on purpose: `mode` is `ok`, `hang` (never answers until stopped), `429` or
`500`/`503`, for all routes or those matching `only`.
With `api_key` set, a request without `Authorization: Bearer <api_key>` gets 401. Like the real
server, chat creates a peer it does not know.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import uuid
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

W = r"/v3/workspaces/(?P<w>[^/]+)"


def free_port() -> int:
    """A loopback port nobody listens on (for a server that is down at start-up)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _now() -> str:
    return datetime.now(UTC).isoformat()


def _page(items: list[dict[str, Any]], query: dict[str, list[str]]) -> dict[str, Any]:
    page, size = int(query.get("page", ["1"])[0]), int(query.get("size", ["50"])[0])
    pages = max(1, -(-len(items) // size))
    return {
        "items": items[(page - 1) * size : page * size],
        "page": page,
        "size": size,
        "total": len(items),
        "pages": pages,
    }


class FakeHoncho:
    """The server and its state; `requests` records (method, path, body, headers) of every call."""

    def __init__(self, port: int = 0) -> None:
        self.port = port
        self.mode = "ok"
        self.api_key: str | None = None
        self.only: str | None = None
        self.requests: list[tuple[str, str, Any, dict[str, str]]] = []
        self.workspaces: dict[str, dict[str, Any]] = {}
        self.peers: dict[tuple[str, str], dict[str, Any]] = {}
        self.sessions: dict[tuple[str, str], dict[str, Any]] = {}
        self.messages: list[dict[str, Any]] = []
        self.conclusions: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.release = threading.Event()
        self.server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """The base URL to give the SDK."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeHoncho:
        """Listen (on the given port, or a free one) in a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                fake.handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.release.clear()
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Release hanging requests and stop listening."""
        self.release.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def calls(self, pattern: str) -> list[tuple[str, str, Any, dict[str, str]]]:
        """Recorded requests whose `METHOD path` matches a regular expression."""
        return [r for r in self.requests if re.search(pattern, f"{r[0]} {r[1]}")]

    # --- HTTP ---------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        with self.lock:
            self.requests.append((request.command, parts.path, body, dict(request.headers)))
        status, payload, headers = self.misbehave(f"{request.command} {parts.path}")
        if status == 0 and self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            status, payload = 401, {"detail": "Invalid JWT"}
        if status == 0:
            status, payload = self.route(request.command, parts.path, body, parse_qs(parts.query))
        data = b"" if payload is None else json.dumps(payload).encode()
        try:
            request.send_response(status)
            for name, value in {
                "Content-Type": "application/json",
                "Content-Length": str(len(data)),
                **headers,
            }.items():
                request.send_header(name, value)
            request.end_headers()
            request.wfile.write(data)
        except OSError:
            pass  # the client gave up (hang mode)

    def misbehave(self, call: str) -> tuple[int, Any, dict[str, str]]:
        if self.mode == "ok" or (self.only and not re.search(self.only, call)):
            return 0, None, {}
        if self.mode == "hang":
            self.release.wait(30)
            return 503, {"detail": "released"}, {}
        if self.mode == "429":
            return 429, {"detail": "Rate limit exceeded"}, {"Retry-After": "0"}
        return int(self.mode), {"detail": "Internal Server Error"}, {}

    def route(self, method: str, path: str, body: Any, query: dict[str, list[str]]) -> tuple[int, Any]:
        body = body or {}
        for route_method, pattern, handler in self.ROUTES:
            match = re.fullmatch(pattern, path)
            if match and method == route_method:
                with self.lock:
                    return handler(self, body=body, query=query, **match.groupdict())
        return 404, {"detail": f"no route {method} {path}"}

    # --- routes -------------------------------------------------------------------------

    def workspace(self, body: Any, query: Any) -> tuple[int, Any]:
        ws = self.workspaces.setdefault(
            body["id"], {"id": body["id"], "metadata": {}, "configuration": {}, "created_at": _now()}
        )
        return 200, ws

    def peer(self, w: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, self._peer(w, body["id"])

    def _peer(self, w: str, pid: str) -> dict[str, Any]:
        return self.peers.setdefault(
            (w, pid), {"id": pid, "workspace_id": w, "created_at": _now(), "metadata": {}, "configuration": {}}
        )

    def session(self, w: str, body: Any, query: Any) -> tuple[int, Any]:
        session = self.sessions.setdefault(
            (w, body["id"]),
            {
                "id": body["id"],
                "is_active": True,
                "workspace_id": w,
                "metadata": {},
                "configuration": {},
                "created_at": _now(),
                "peers": set(),
            },
        )
        session["peers"] |= set(body.get("peers") or {})
        return 200, self._public(session)

    @staticmethod
    def _public(session: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in session.items() if k != "peers"}

    def add_messages(self, w: str, s: str, body: Any, query: Any) -> tuple[int, Any]:
        if (w, s) not in self.sessions:
            return 404, {"detail": "Session not found"}
        created = []
        for item in body["messages"]:
            message = {
                "id": uuid.uuid4().hex,
                "content": item["content"],
                "peer_id": item["peer_id"],
                "session_id": s,
                "metadata": item.get("metadata") or {},
                "created_at": _now(),
                "workspace_id": w,
                "token_count": len(item["content"].split()),
            }
            self.messages.append(message)
            self.sessions[(w, s)]["peers"].add(item["peer_id"])
            self._peer(w, item["peer_id"])
            if ((item.get("configuration") or {}).get("reasoning") or {}).get("enabled") is not False:
                self._conclude(w, item["peer_id"], item["peer_id"], f"{item['peer_id']} said: {item['content']}", s)
            created.append(message)
        return 200, created

    def list_messages(self, w: str, s: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, _page([m for m in self.messages if m["workspace_id"] == w and m["session_id"] == s], query)

    def delete_session(self, w: str, s: str, body: Any, query: Any) -> tuple[int, Any]:
        if self.sessions.pop((w, s), None) is None:
            return 404, {"detail": "Session not found"}
        self.messages = [m for m in self.messages if not (m["workspace_id"] == w and m["session_id"] == s)]
        for cid in [c for c, v in self.conclusions.items() if v["workspace"] == w and v["session_id"] == s]:
            del self.conclusions[cid]
        return 202, None

    def peer_sessions(self, w: str, p: str, body: Any, query: Any) -> tuple[int, Any]:
        items = [self._public(v) for (ws, _), v in self.sessions.items() if ws == w and p in v["peers"]]
        return 200, _page(items, query)

    def _about(self, w: str, p: str) -> list[dict[str, Any]]:
        return [c for c in self.conclusions.values() if c["workspace"] == w and c["observed_id"] == p]

    def list_peers(self, w: str, body: Any, query: Any) -> tuple[int, Any]:
        filters = body.get("filters") or {}
        items = [v for (ws, pid), v in self.peers.items() if ws == w and filters.get("id", pid) == pid]
        return 200, _page(items, query)

    def chat(self, w: str, p: str, body: Any, query: Any) -> tuple[int, Any]:
        self._peer(w, p)  # the real chat route gets-or-creates the peer
        words = set(re.findall(r"\w{4,}", body["query"].lower()))
        about = self._about(w, p)
        relevant = [c["content"] for c in about if words & set(re.findall(r"\w{4,}", c["content"].lower()))]
        picked = relevant or [c["content"] for c in about[-3:]]
        return 200, {"content": f"What I know about {p}: " + " ".join(picked) if picked else None}

    def representation(self, w: str, p: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, {"representation": "\n".join(f"- {c['content']}" for c in self._about(w, p))}

    def card(self, w: str, p: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, {"peer_card": [f"Peer id: {p}"] if (w, p) in self.peers else None}

    def create_conclusions(self, w: str, body: Any, query: Any) -> tuple[int, Any]:
        return 200, [
            self._public_conclusion(
                self._conclude(w, c["observer_id"], c["observed_id"], c["content"], c.get("session_id"))
            )
            for c in body["conclusions"]
        ]

    def _conclude(self, w: str, observer: str, observed: str, content: str, session_id: str | None) -> dict[str, Any]:
        cid = uuid.uuid4().hex
        self.conclusions[cid] = {
            "id": cid,
            "content": content,
            "observer_id": observer,
            "observed_id": observed,
            "session_id": session_id,
            "level": "explicit",
            "created_at": _now(),
            "workspace": w,
        }
        return self.conclusions[cid]

    @staticmethod
    def _public_conclusion(c: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in c.items() if k != "workspace"}

    def list_conclusions(self, w: str, body: Any, query: Any) -> tuple[int, Any]:
        filters = body.get("filters") or {}
        items = [
            self._public_conclusion(c)
            for c in self.conclusions.values()
            if c["workspace"] == w and all(c.get(k) == v for k, v in filters.items())
        ]
        return 200, _page(items, query)

    def delete_conclusion(self, w: str, c: str, body: Any, query: Any) -> tuple[int, Any]:
        if self.conclusions.pop(c, None) is None:
            return 404, {"detail": "Conclusion not found"}
        return 202, None

    ROUTES: list[tuple[str, str, Any]] = [
        ("POST", r"/v3/workspaces", workspace),
        ("POST", W + r"/peers", peer),
        ("POST", W + r"/peers/list", list_peers),
        ("POST", W + r"/sessions", session),
        ("POST", W + r"/sessions/(?P<s>[^/]+)/messages", add_messages),
        ("POST", W + r"/sessions/(?P<s>[^/]+)/messages/list", list_messages),
        ("DELETE", W + r"/sessions/(?P<s>[^/]+)", delete_session),
        ("POST", W + r"/peers/(?P<p>[^/]+)/sessions", peer_sessions),
        ("POST", W + r"/peers/(?P<p>[^/]+)/chat", chat),
        ("POST", W + r"/peers/(?P<p>[^/]+)/representation", representation),
        ("GET", W + r"/peers/(?P<p>[^/]+)/card", card),
        ("POST", W + r"/conclusions", create_conclusions),
        ("POST", W + r"/conclusions/list", list_conclusions),
        ("DELETE", W + r"/conclusions/(?P<c>[^/]+)", delete_conclusion),
    ]
