"""Socket Mode against a local websocket server speaking Slack's envelope protocol; the CLI and hooks."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
import thoth_slack.plugin
from click.testing import CliRunner
from thoth_slack.cards import APPROVE
from thoth_slack.serve import socket_mode_handler, start
from thoth_slack.testing import FakeSocketMode, event_body, mention, signed

from thoth_core import ThothError, hookimpl
from thoth_core.cli import ThothGroup


@pytest.fixture
def socket_server(fake_slack):
    server = FakeSocketMode()
    fake_slack.socket_url = server.url
    yield server
    server.close()


def test_socket_mode_mention_is_acked_and_answered(make_slack, socket_server):
    slack = make_slack(http=False, replies=[{"reply": "Hello over the socket"}])
    handler = socket_mode_handler(slack.bridge)
    handler.connect()
    try:
        [opened] = [h for method, _, h in slack.fake.calls if method == "apps.connections.open"]
        assert opened["Authorization"] == "Bearer xapp-test-token"
        envelope_id = socket_server.push(event_body(mention("hi")))
        assert socket_server.wait_for_ack(envelope_id) == {"envelope_id": envelope_id}
        update = slack.fake.wait_for("chat.update", lambda p: p["text"] == "Hello over the socket")
        [post] = slack.fake.calls_to("chat.postMessage")
        assert update["ts"] == post["_ts"] and post["thread_ts"] == "1700000000.000100"
    finally:
        handler.close()


def test_socket_mode_button_is_acked_and_decided(make_slack, socket_server):
    decided = []

    class Owner:
        @hookimpl
        def approvals(self):
            return [{"id": "skill:x", "kind": "skill", "title": "x", "body": "", "workspace": None, "peer": None}]

        @hookimpl
        def decide(self, item_id, decision, actor):
            decided.append((item_id, decision, actor))
            return {"message": "done"}

    slack = make_slack({"owner": Owner()}, http=False, founders=["UBOSS"])
    handler = socket_mode_handler(slack.bridge)
    handler.connect()
    try:
        payload = {
            "type": "block_actions",
            "team": {"id": "T1"},
            "user": {"id": "UBOSS"},
            "api_app_id": "A1",
            "trigger_id": "t",
            "container": {"type": "message", "message_ts": "1700000050.000001", "channel_id": "CAPPROVALS"},
            "channel": {"id": "CAPPROVALS"},
            "message": {"ts": "1700000050.000001", "text": "card"},
            "actions": [
                {
                    "type": "button",
                    "action_id": APPROVE,
                    "block_id": "thoth_decision",
                    "value": "skill:x",
                    "action_ts": "1",
                }
            ],
        }
        envelope_id = socket_server.push(payload, kind="interactive")
        socket_server.wait_for_ack(envelope_id)
        slack.fake.wait_for("chat.update", lambda p: p["ts"] == "1700000050.000001")
        assert decided == [("skill:x", "approve", "UBOSS")]
    finally:
        handler.close()


def test_plugin_registers_frontend_command_and_cli(make_runtime):
    runtime = make_runtime({"slack": thoth_slack.plugin})
    assert "slack" in runtime.registry("register_frontends")
    assert "new" not in runtime.commands  # /new is the Slack frontend's own, not a core command other frontends see
    result = CliRunner().invoke(ThothGroup("thoth"), ["slack", "--help"])  # a fresh group loads plugin commands
    assert result.exit_code == 0 and "--http PORT" in result.output


def test_notify_without_a_running_bridge_does_nothing(make_runtime):
    runtime = make_runtime({"slack": thoth_slack.plugin})
    assert (
        thoth_slack.plugin.notify(event="check_in", payload={"text": "hi", "thread": "C1:1.2"}, runtime=runtime) is None
    )


def test_thoth_slack_with_a_literal_token_exits_2(tmp_path, monkeypatch):
    (tmp_path / "thoth.toml").write_text('[plugins.slack]\nbot_token = "xoxb-literal"\n')
    monkeypatch.setenv("THOTH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "slack")
    result = CliRunner().invoke(ThothGroup("thoth"), ["slack"])
    assert result.exit_code == 2
    assert "thoth.toml:2: plugins.slack.bot_token: secrets are references, not values" in result.output


class Ends:
    def __init__(self):
        self.ended = []

    @hookimpl
    def session_end(self, session, reason):
        self.ended.append((session.thread, reason))


def _config(fake_slack, **slack):
    return {
        "plugins": {
            "slack": {
                "bot_token": {"$env": "SLACK_BOT_TOKEN"},
                "app_token": {"$env": "SLACK_APP_TOKEN"},
                "signing_secret": {"$env": "SLACK_SIGNING_SECRET"},
                "api_url": fake_slack.url,
                **slack,
            }
        }
    }


def test_start_runs_socket_mode_until_stopped_then_ends_sessions(make_runtime, fake_slack, socket_server):
    ends = Ends()
    runtime = make_runtime(
        {"slack": thoth_slack.plugin, "ends": ends}, config=_config(fake_slack), replies=[{"reply": "hi!"}]
    )
    stop = threading.Event()
    runner = threading.Thread(target=start, args=(runtime,), kwargs={"stop": stop})
    runner.start()
    try:
        socket_server.wait_for_ack(socket_server.push(event_body(mention("hello"))))
        fake_slack.wait_for("chat.update", lambda p: p["text"] == "hi!")
    finally:
        stop.set()
        runner.join(20)
    assert not runner.is_alive()
    assert ends.ended == [("CGENERAL:1700000000.000100", "exit")]


def test_start_serves_http_when_given_a_port(make_runtime, fake_slack):
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    runtime = make_runtime({"slack": thoth_slack.plugin}, config=_config(fake_slack), replies=[{"reply": "over http"}])
    stop = threading.Event()
    runner = threading.Thread(target=start, args=(runtime,), kwargs={"stop": stop, "http_port": port})
    runner.start()
    try:
        request = signed(json.dumps(event_body(mention("hello"))))
        http = urllib.request.Request(
            f"http://127.0.0.1:{port}/slack/events",
            data=request.raw_body.encode(),
            headers={k: v[0] for k, v in request.headers.items()},
        )
        deadline, status = time.monotonic() + 30, None
        while status is None and time.monotonic() < deadline:  # the server starts on the runner's thread
            try:
                with urllib.request.urlopen(http, timeout=5) as response:
                    status = response.status
            except urllib.error.URLError:
                time.sleep(0.05)
        assert status == 200
        fake_slack.wait_for("chat.update", lambda p: p["text"] == "over http")
    finally:
        stop.set()
        runner.join(20)
    assert not runner.is_alive()


def test_thoth_slack_command_end_to_end_stops_on_sigterm(tmp_path, fake_slack, socket_server):
    import os
    import signal
    import subprocess
    import sys

    (tmp_path / "thoth.toml").write_text(
        '[thoth]\nmodel = "replay"\n\n[models.replay]\nrules = [{ reply = "from the CLI" }]\n\n'
        f'[plugins.slack]\nbot_token = {{ "$env" = "SLACK_BOT_TOKEN" }}\napp_token = {{ "$env" = "SLACK_APP_TOKEN" }}\n'
        f'api_url = "{fake_slack.url}"\n'
    )
    env = dict(os.environ, THOTH_HOME=str(tmp_path / "home"), THOTH_LOAD_PLUGINS="slack")
    command = [sys.executable, "-c", "from thoth_core.cli import main; main()", "slack"]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    try:
        connected = socket_server.connected.wait(60)  # a new interpreter may start slowly on a busy machine
        if connected:
            socket_server.wait_for_ack(socket_server.push(event_body(mention("hello"))), timeout=30)
            fake_slack.wait_for("chat.update", lambda p: p["text"] == "from the CLI", timeout=30)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    assert connected, stderr
    assert process.returncode == 0, stderr
    assert "connected in Socket Mode as <@UBOT>" in stderr


@pytest.mark.parametrize(("method", "key"), [("auth.test", "bot_token"), ("apps.connections.open", "app_token")])
def test_a_refused_token_is_a_one_line_error(make_runtime, fake_slack, method, key):
    fake_slack.errors[method] = "invalid_auth"
    runtime = make_runtime({"slack": thoth_slack.plugin}, config=_config(fake_slack))
    with pytest.raises(ThothError, match=rf"^Slack refused the token in plugins.slack.{key}: invalid_auth$"):
        start(runtime, stop=threading.Event())


def test_an_unreachable_slack_is_a_one_line_error(make_runtime, fake_slack):
    fake_slack.close()
    runtime = make_runtime({"slack": thoth_slack.plugin}, config=_config(fake_slack))
    with pytest.raises(ThothError, match=r"^cannot reach the Slack Web API \(\[plugins.slack\] api_url\)"):
        start(runtime, stop=threading.Event())
