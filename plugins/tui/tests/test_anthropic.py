"""Pilot tests through the real anthropic provider against the fake Messages server on 127.0.0.1."""

from __future__ import annotations

import socket
import threading

from thoth_tui.chat import ChatMessage


def anthropic_config(url: str) -> dict:
    return {
        "thoth": {"model": "anthropic"},
        "models": {"anthropic": {"base_url": url, "api_key": "test-key", "max_retries": 0, "timeout": 10}},
    }


def closed_port_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def until(pilot, condition, *, seconds: float = 10.0) -> None:
    """Let the app run until condition() holds (a generous deadline, not a timing assertion)."""
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError("condition never held")


async def test_reply_streams_from_the_messages_api(make_app, fake_anthropic, wait, send):
    pause = threading.Event()
    reply_text = "Hello **Ann**! Three things:\n\n1. tea\n2. toast\n3. jam"
    fake_anthropic.replies = [{"match": "breakfast", "reply": reply_text, "pause": pause}]
    app = make_app(config=anthropic_config(fake_anthropic.url))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait(app, pilot)
        assert not app.query_one("#banner").has_class("shown")
        app.query_one("#prompt").value = "what is for breakfast?"
        await pilot.press("enter")
        await until(pilot, lambda: any(m.role == "assistant" and m.text for m in app.query(ChatMessage)))
        [reply] = [m for m in app.query(ChatMessage) if m.role == "assistant"]
        partial = reply.text
        assert (
            partial and reply_text.startswith(partial) and partial != reply_text
        )  # shown before the reply is complete
        assert not reply.loading
        live = reply.query_one("Markdown")  # streaming into a Markdown widget
        assert [type(block).__name__ for block in live.children] == ["MarkdownParagraph"]
        pause.set()
        await wait(app, pilot)
        assert reply.text == reply_text and reply.turn_id
        assert not reply.query("Markdown")  # finished: swapped for one static render
    [request] = fake_anthropic.messages_requests
    assert request.body["stream"] is True and request.api_key == "test-key"
    assert request.body["messages"][-1] == {"role": "user", "content": "what is for breakfast?"}


async def test_error_banner_when_the_model_server_is_down(make_app, wait, send):
    url = closed_port_url()
    app = make_app(config=anthropic_config(url))
    async with app.run_test() as pilot:
        await send(app, pilot, "hello?")
        banner = str(app.query_one("#banner").render())
        assert banner.startswith(f"Model failed: anthropic: cannot reach models.anthropic.base_url {url}")
        assert "thoth doctor" in banner
        assert [m.role for m in app.query(ChatMessage)] == ["notice", "user", "error"]
        await send(app, pilot, "/whoami")  # commands still work while the model is down
        assert "peer ann" in list(app.query(ChatMessage))[-1].text


async def test_banner_clears_once_the_server_answers(make_app, fake_anthropic, wait, send):
    fake_anthropic.replies = ["Back again."]
    fake_anthropic.fail_with(529, times=1)
    app = make_app(config=anthropic_config(fake_anthropic.url))
    async with app.run_test() as pilot:
        await send(app, pilot, "hi")
        assert "Model failed: anthropic:" in str(app.query_one("#banner").render())
        await send(app, pilot, "hi again")
        assert not app.query_one("#banner").has_class("shown")
        assert [m.text for m in app.query(ChatMessage) if m.role == "assistant"] == ["Back again."]
