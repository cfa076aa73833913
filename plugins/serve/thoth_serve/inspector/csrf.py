"""Cross-site request forgery: every form carries the token of a same-site cookie, and a foreign Origin is refused."""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

COOKIE = "thoth_csrf"
FIELD = "csrf"


def token_of(request: Request) -> str:
    """The browser's token (its cookie), or a new one that `remember` sets on the response."""
    found = request.cookies.get(COOKIE, "")
    return found if len(found) >= 32 else secrets.token_urlsafe(32)


def remember(response: Response, request: Request, token: str) -> None:
    """Set the token's cookie when the browser does not hold it yet (SameSite=Strict, not readable by scripts)."""
    if request.cookies.get(COOKIE) != token:
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")


def refusal(request: Request, form_token: object) -> str | None:
    """Why a form post is refused (one line), or None when it comes from this site's own page."""
    origin = request.headers.get("origin")
    if origin and origin != "null":
        host = request.headers.get("host", "")
        if urlsplit(origin).netloc != host:
            return f"refused: the form came from {origin}, not from this server ({host})"
    cookie = request.cookies.get(COOKIE, "")
    if not cookie or not isinstance(form_token, str) or not secrets.compare_digest(cookie, form_token):
        return "refused: the form's security token is missing or stale; reload the page and try again"
    return None
