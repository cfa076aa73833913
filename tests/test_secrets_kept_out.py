"""Secrets said in a chat are kept by no layer: every store holds a typed placeholder instead.

The model still gets this turn's message as typed; what is kept (history sent in later turns,
transcripts, the journal, episodes and their index, identity messages) is redacted once, in the
runtime, before any writer sees it. `/remember` of a secret is refused.
"""

from __future__ import annotations

import secrets
import string
from pathlib import Path

import pytest

from thoth_core.testing import make_test_runtime

working = pytest.importorskip("thoth_working.plugin")
identity = pytest.importorskip("thoth_identity.plugin")
episodic = pytest.importorskip("thoth_episodic.plugin")


def fake_secrets() -> dict[str, str]:
    """Fresh, realistic-looking (and useless) secrets of a few kinds."""
    alnum = string.ascii_letters + string.digits
    pick = lambda n, chars=alnum: "".join(secrets.choice(chars) for _ in range(n))  # noqa: E731
    return {
        "aws": "AKIA" + pick(16, string.ascii_uppercase + string.digits),
        "anthropic": "sk-ant-api03-" + pick(93, alnum + "-_") + "AA",
        "github": "ghp_" + pick(36),
        "postgres": f"postgres://deploy:{pick(20)}@db.internal:5432/app",
    }


def raw_bytes(home: Path) -> bytes:
    return b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())


async def test_a_secret_said_in_a_turn_reaches_no_store_and_no_later_prompt(tmp_path):
    found = fake_secrets()
    text = "Here are the creds: " + ", ".join(found.values()) + ". Please keep them handy."
    runtime = make_test_runtime(
        tmp_path,
        {"working": working, "identity": identity, "episodic": episodic},
        replies=[{"match": "creds", "reply": f"Got it: {found['github']}"}, {"reply": "ok"}],
    )
    first = await runtime.turn(text, peer="ann", thread="t")
    assert first.reply.text == f"Got it: {found['github']}"  # shown as the model said it
    second = await runtime.turn("what did I give you?", peer="ann", thread="t")
    await runtime.drain()
    history = " ".join(m.content for m in second.session.history if isinstance(m.content, str))
    assert "[REDACTED:" in history and not any(value in history for value in found.values())
    await runtime.aclose()
    stored = raw_bytes(tmp_path)
    assert b"[REDACTED:" in stored and b"keep them handy" in stored
    for kind, value in found.items():
        assert value.encode() not in stored, f"the {kind} secret was stored"


async def test_remember_refuses_a_secret(tmp_path):
    runtime = make_test_runtime(tmp_path, {"working": working, "identity": identity})
    key = fake_secrets()["anthropic"]
    reply = (await runtime.turn(f"/remember my api key is {key}", peer="ann", thread="t")).reply.text
    assert reply.startswith("/remember: not stored: that holds a secret (anthropic")
    assert "secrets are never kept in memory" in reply
    await runtime.aclose()
    assert key.encode() not in raw_bytes(tmp_path)
