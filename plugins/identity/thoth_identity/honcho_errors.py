"""What a failed Honcho call means: its kind, one line that says so, and whether trying again can help."""

from __future__ import annotations

from honcho.http.exceptions import (
    AuthenticationError,
    BadRequestError,
    ConnectionError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    ServerError,
    UnprocessableEntityError,
)
from honcho.http.exceptions import TimeoutError as HonchoTimeout

# kind -> can a later attempt (same key, same request) succeed?
RETRYABLE = {
    "timeout": True,
    "unreachable": True,
    "rate_limited": True,
    "server_error": True,
    "unauthorized": False,
    "forbidden": False,
    "rejected": False,
    "not_found": False,
    "failed": True,
}


def error_kind(exc: BaseException) -> str:
    """The kind of failure: one of the keys of RETRYABLE (`timeout`, `unreachable`, `unauthorized`, ...)."""
    if isinstance(exc, TimeoutError | HonchoTimeout):
        return "timeout"
    if isinstance(exc, ConnectionError | OSError):
        return "unreachable"
    if isinstance(exc, AuthenticationError):
        return "unauthorized"
    if isinstance(exc, PermissionDeniedError):
        return "forbidden"
    if isinstance(exc, RateLimitError):
        return "rate_limited"
    if isinstance(exc, ServerError):
        return "server_error"
    if isinstance(exc, BadRequestError | UnprocessableEntityError):
        return "rejected"
    if isinstance(exc, NotFoundError):
        return "not_found"
    return "failed"


def describe(exc: BaseException, base_url: str | None = None) -> str:
    """One line naming what went wrong, e.g. `Honcho refused the API key (401 Unauthorized): ...`."""
    kind = error_kind(exc)
    where = f" at {base_url}" if base_url else ""
    detail = str(exc).strip() or type(exc).__name__
    if kind == "timeout":
        return "no answer in time"
    if kind == "unauthorized":
        return (
            f"Honcho{where} refused the API key (401 Unauthorized: {detail}); "
            'set [plugins.identity] api_key to a valid key, e.g. api_key = { "$env" = "HONCHO_API_KEY" }'
        )
    if kind == "forbidden":
        return f"the API key may not do this in Honcho{where} (403 Forbidden: {detail}); use a key for this workspace"
    if kind == "unreachable":
        return f"cannot connect to Honcho{where} ({type(exc).__name__}: {detail})"
    return f"{type(exc).__name__}: {detail}"


def retryable(exc: BaseException) -> bool:
    """Whether trying the same call again later can succeed (not for auth, permission or rejected input)."""
    return RETRYABLE[error_kind(exc)]
