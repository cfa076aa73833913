"""Block Kit for approval cards: a pending card with buttons, and the decided card.

Titles and texts come from other layers (often from a model), so they are escaped.
"""

from __future__ import annotations

from typing import Any

from .mrkdwn import escape

APPROVE = "thoth_approve"
REJECT = "thoth_reject"
LIMIT = 2900  # a section's text may hold 3000 characters


def pending_card(item_id: str, title: str, text: str) -> list[dict[str, Any]]:
    """A card asking the deciders to approve or reject an item; the buttons carry its id."""
    return [
        *_item(item_id, title, text),
        {
            "type": "context",
            "elements": [
                _mrkdwn(
                    "Approve or reject with the buttons, or react :white_check_mark: / :x:. Founders decide (without "
                    "founders, the workspace's admins); the person it is about may withdraw it with Reject."
                )
            ],
        },
        {
            "type": "actions",
            "block_id": "thoth_decision",
            "elements": [
                _button("Approve", APPROVE, item_id, "primary"),
                _button("Reject", REJECT, item_id, "danger"),
            ],
        },
    ]


def decided_card(
    item_id: str, title: str, text: str, *, decision: str, actor: str, message: str = ""
) -> list[dict[str, Any]]:
    """The card after a decision: no buttons, and who decided."""
    mark = ":white_check_mark: Approved" if decision == "approve" else ":x: Rejected"
    note = f" - {escape(message)}" if message else ""
    return [
        *_item(item_id, title, text),
        {"type": "context", "elements": [_mrkdwn(f"{mark} by <@{actor}>{note}")]},
    ]


def _item(item_id: str, title: str, text: str) -> list[dict[str, Any]]:
    return [_section(f"*{escape(title)}*\n`{escape(item_id)}`"), _section(escape(text) or "(no text)")]


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": _mrkdwn(text if len(text) <= LIMIT else text[: LIMIT - 1] + "…")}


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def _button(label: str, action_id: str, value: str, style: str) -> dict[str, Any]:
    return {
        "type": "button",
        "text": {"type": "plain_text", "text": label},
        "action_id": action_id,
        "value": value,
        "style": style,
    }
