"""Rendering: the Jinja2 environment (autoescaped), whose memory a page shows, and the page's shared context."""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse

from thoth_core.approvals import os_user
from thoth_core.errors import ThothError
from thoth_core.scope import valid_name

from . import csrf
from .notes import note_of

MAX_PEERS = 50
NAV = (
    ("/", "Overview"),
    ("/sessions", "Sessions"),
    ("/identity", "Identity"),
    ("/episodes", "Episodes"),
    ("/files", "Files"),
    ("/approvals", "Approvals"),
    ("/forget", "Forget"),
)


@dataclass(frozen=True)
class Who:
    """Whose memory a page shows: a peer in a workspace (None: the runtime's default workspace)."""

    peer: str
    workspace: str | None

    def query(self, **more: object) -> str:
        """The query string that keeps this peer and workspace, plus `more`."""
        pairs: dict[str, object] = {"peer": self.peer}
        if self.workspace:
            pairs["workspace"] = self.workspace
        pairs.update({k: v for k, v in more.items() if v not in (None, "")})
        return "?" + urlencode(pairs)


def who(request: Request) -> Who:
    """The peer and workspace a request asks for (else the home's owner), within the server's pin (`--peer`).

    A bad name or one the pin refuses raises ThothError (one line).
    """
    served = getattr(request.app.state, "serve", None)
    scope = getattr(served, "scope", None)
    runtime = request.app.state.runtime
    peer = request.query_params.get("peer") or ""
    workspace = request.query_params.get("workspace") or ""
    if not peer and getattr(scope, "peer", None) is None:
        peer = str(runtime.config.get("thoth.owner") or os_user() or "me")
    if scope is not None:
        return Who(scope.peer_for(peer or None), scope.workspace_for(workspace or None))
    return Who(valid_name("peer", peer), valid_name("workspace", workspace) if workspace else None)


def when(at: Any) -> str:
    """A unix time as local date and time, or empty."""
    if not isinstance(at, int | float) or at <= 0:
        return ""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(at))


def known_peers(request: Request, person: Who | None) -> list[str]:
    """Peers the picker offers: the one shown, the home's owner and those with a session open in this process."""
    scope = getattr(getattr(request.app.state, "serve", None), "scope", None)
    pinned = getattr(scope, "peer", None)
    if pinned:
        return [str(pinned)]
    runtime = request.app.state.runtime
    found = [person.peer] if person else []
    found.append(str(runtime.config.get("thoth.owner") or os_user() or ""))
    found += sorted({key[1] for key in getattr(runtime, "sessions", {})})
    return [peer for peer in dict.fromkeys(found) if peer][:MAX_PEERS]


@cache
def environment() -> Environment:
    """The templates shipped in the package, every value escaped unless a view marks it safe."""
    env = Environment(
        loader=PackageLoader("thoth_serve.inspector", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["when"] = when
    return env


def render(request: Request, template: str, *, status_code: int = 200, **context: Any) -> HTMLResponse:
    """A page: the template with whose memory it shows, the navigation, the form token and the context."""
    token = csrf.token_of(request)
    try:
        person: Who | None = context.pop("who", None) or who(request)
    except ThothError:
        person = None
    context.setdefault("note", note_of(request))
    runtime = request.app.state.runtime
    page = environment().get_template(template).render(
        request=request,
        who=person,
        peers=known_peers(request, person),
        nav=NAV,
        path=request.url.path,
        csrf_field=csrf.FIELD,
        csrf_token=token,
        home=str(runtime.home),
        agent=getattr(runtime, "agent", None),
        **context,
    )
    response = HTMLResponse(page, status_code=status_code)
    csrf.remember(response, request, token)
    return response
