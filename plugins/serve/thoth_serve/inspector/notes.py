"""What a form post did (a message, a forget receipt), kept for the page the browser is redirected to."""

from __future__ import annotations

import secrets
from collections import OrderedDict
from typing import Any

from starlette.requests import Request

KEPT_NOTES = 200


class Notes:
    """What a form post did (a message, a forget receipt), kept for the page the browser is redirected to."""

    def __init__(self) -> None:
        self._notes: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def put(self, **note: Any) -> str:
        """Keep a note; its id for the redirect's query string."""
        key = secrets.token_urlsafe(12)
        self._notes[key] = note
        while len(self._notes) > KEPT_NOTES:
            self._notes.popitem(last=False)
        return key

    def get(self, key: str | None) -> dict[str, Any] | None:
        """The note of a redirect, or None."""
        return self._notes.get(key) if key else None


def notes_of(request: Request) -> Notes:
    """The app's notes (made on first use)."""
    state = request.app.state
    if not hasattr(state, "inspector_notes"):
        state.inspector_notes = Notes()
    notes: Notes = state.inspector_notes
    return notes


def note_of(request: Request) -> dict[str, Any] | None:
    """The note the redirect named."""
    return notes_of(request).get(request.query_params.get("note"))
