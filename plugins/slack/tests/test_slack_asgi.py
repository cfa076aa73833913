"""HTTP mode as an ASGI app under a real uvicorn with two worker processes sharing one PostgreSQL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from thoth_slack.testing import event_body, mention, signed

pytestmark = pytest.mark.slow  # spawns thoth processes

pytest.importorskip("uvicorn")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _post(port: int, body: str, **headers: str) -> int:
    request = signed(body)
    sent = {k: v[0] for k, v in request.headers.items()} | headers
    http = urllib.request.Request(f"http://127.0.0.1:{port}/slack/events", data=body.encode(), headers=sent)
    with urllib.request.urlopen(http, timeout=10) as response:
        return response.status


def test_uvicorn_with_two_workers_answers_each_message_once_in_order(tmp_path, fake_slack, storage_url):
    rules = ", ".join(f'{{ match = "q{i}\\\\b", reply = "a{i}" }}' for i in range(6))
    (tmp_path / "thoth.toml").write_text(
        f'[thoth]\nmodel = "replay"\n\n[storage]\nurl = "{storage_url}"\n\n[models.replay]\nrules = [{rules}]\n\n'
        '[plugins.slack]\nbot_token = { "$env" = "SLACK_BOT_TOKEN" }\n'
        f'signing_secret = {{ "$env" = "SLACK_SIGNING_SECRET" }}\napi_url = "{fake_slack.url}"\nstream_interval = 0\n'
    )
    port = _free_port()
    env = dict(os.environ, THOTH_CONFIG=str(tmp_path / "thoth.toml"), THOTH_LOAD_PLUGINS="slack")
    env["THOTH_HOME"] = str(tmp_path / "data")
    command = [sys.executable, "-m", "uvicorn", "thoth_slack.asgi:app", "--port", str(port), "--workers", "2"]
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(fake_slack.calls_to("auth.test")) < 2:  # each worker checked its token on startup
            assert server.poll() is None and time.monotonic() < deadline, "uvicorn did not start its workers"
            time.sleep(0.1)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "uvicorn is not listening"
                time.sleep(0.1)
        roots = ["1700000000.000100", "1700000500.000100"]
        for i in range(6):
            root = roots[i % 2]
            event = mention(f"q{i}", ts=root) if i < 2 else mention(f"q{i}", ts=f"{root[:-3]}{i}00", thread_ts=root)
            body = json.dumps(event_body(event))
            assert _post(port, body) == 200
            if i == 3:  # Slack retries one it thinks was not acked in time
                assert _post(port, body, **{"X-Slack-Retry-Num": "1"}) == 200
        for root, expected in zip(roots, (["a0", "a2", "a4"], ["a1", "a3", "a5"]), strict=True):
            fake_slack.wait_for("chat.update", lambda p, last=expected[-1]: p["text"] == last, timeout=30)
            posts = [p for p in fake_slack.calls_to("chat.postMessage") if p.get("thread_ts") == root]
            finals = [[u["text"] for u in fake_slack.calls_to("chat.update") if u["ts"] == p["_ts"]][-1] for p in posts]
            assert finals == expected
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr
    assert stderr.count("Application startup complete") == 2, stderr
    assert stderr.count("Application shutdown complete") == 2, stderr


def test_a_bad_config_fails_the_servers_startup_with_one_line():
    import asyncio

    from thoth_slack.asgi import SlackApp

    from thoth_core import ConfigError

    def build():
        raise ConfigError("thoth.toml:7: plugins.slack.signing_secret: HTTP mode needs signing_secret")

    sent = []

    async def lifespan():
        messages = iter([{"type": "lifespan.startup"}])

        async def receive():
            return next(messages)

        async def send(message):
            sent.append(message)

        await SlackApp(build)({"type": "lifespan"}, receive, send)

    asyncio.run(lifespan())
    assert sent == [
        {
            "type": "lifespan.startup.failed",
            "message": "thoth slack: thoth.toml:7: plugins.slack.signing_secret: HTTP mode needs signing_secret",
        }
    ]
