"""Signatures, timestamps, allowed workspaces and channels, tokens only by environment reference."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from types import SimpleNamespace

import pytest
from slack_bolt import BoltRequest
from thoth_slack.serve import EVENTS_PATH, http_server
from thoth_slack.settings import load_settings
from thoth_slack.testing import SECRET, dm, event_body, mention, signed

from thoth_core import ConfigError
from thoth_core.config import load_config


def _body(text="hello"):
    return json.dumps(event_body(mention(text)))


def test_forged_signature_is_rejected_with_401(make_slack):
    slack = make_slack()
    response = slack.bridge.app.dispatch(signed(_body(), secret="not-the-secret"))
    slack.bridge.loop.join()
    assert response.status == 401
    assert slack.fake.calls_to("chat.postMessage") == [] and slack.runtime.sessions == {}


def test_unsigned_and_tampered_requests_are_rejected(make_slack):
    slack = make_slack()
    unsigned = BoltRequest(body=_body(), headers={"content-type": ["application/json"]})
    genuine = signed(_body("hello"))
    assert slack.bridge.app.dispatch(unsigned).status == 401
    assert slack.bridge.app.dispatch(signed(_body("hello"))).status == 200  # the control: a good signature passes
    tampered = BoltRequest(
        body=_body("transfer the money"), headers=dict(genuine.headers)
    )  # genuine headers, other body
    assert slack.bridge.app.dispatch(tampered).status == 401
    slack.bridge.loop.join()
    assert len(slack.fake.calls_to("chat.postMessage")) == 1


def test_replayed_old_timestamp_is_rejected(make_slack):
    slack = make_slack()
    old = int(time.time()) - 10 * 60
    response = slack.bridge.app.dispatch(signed(_body(), timestamp=old))  # a correct signature, but 10 minutes old
    slack.bridge.loop.join()
    assert response.status == 401
    assert slack.fake.calls_to("chat.postMessage") == []


def test_only_allowed_workspaces_and_channels_are_answered(make_slack):
    slack = make_slack(slack={"allowed_workspaces": ["T1"], "allowed_channels": ["CGENERAL"]})
    assert slack.send(mention("from another workspace"), team="T9").status == 200
    slack.send(mention("in another channel", channel="CRANDOM"))
    assert slack.fake.calls_to("chat.postMessage") == []
    slack.send(mention("in the allowed channel"))
    slack.send(dm("a direct message"))
    assert [p["channel"] for p in slack.fake.calls_to("chat.postMessage")] == ["CGENERAL", "DANN"]


def test_dms_can_be_switched_off(make_slack):
    slack = make_slack(slack={"allow_dms": False})
    slack.send(dm("hello"))
    assert slack.fake.calls_to("chat.postMessage") == []


def test_http_mode_serves_signed_requests_and_refuses_forged_ones(make_slack):
    slack = make_slack(replies=[{"reply": "over HTTP"}])
    server = http_server(slack.bridge, 0)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}{EVENTS_PATH}"

    def post(request):
        http = urllib.request.Request(
            url, data=request.raw_body.encode(), method="POST", headers={k: v[0] for k, v in request.headers.items()}
        )
        try:
            with urllib.request.urlopen(http, timeout=10) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    try:
        challenge = json.dumps({"token": "t", "challenge": "abc123", "type": "url_verification"})
        assert post(signed(challenge)) == (200, json.dumps({"challenge": "abc123"}))
        assert post(signed(_body(), secret="forged"))[0] == 401
        assert post(signed(_body(), timestamp=int(time.time()) - 3600))[0] == 401
        assert post(signed(_body()))[0] == 200
        slack.bridge.loop.join()
        assert slack.replies("CGENERAL", "1700000000.000100") == ["over HTTP"]
    finally:
        server.shutdown()
        server.server_close()


def _settings_from(tmp_path, text, *, http=True):
    path = tmp_path / "thoth.toml"
    path.write_text(text)
    return load_settings(SimpleNamespace(config=load_config(path)), http=http)


GOOD = """[thoth]
founders = ["UBOSS"]

[plugins.slack]
bot_token = { "$env" = "SLACK_BOT_TOKEN" }
signing_secret = { "$env" = "SLACK_SIGNING_SECRET" }
app_token = { "$env" = "SLACK_APP_TOKEN" }
allowed_channels = ["CGENERAL"]
approvals_channel = "CAPPROVALS"
"""


def test_settings_from_environment_references(tmp_path):
    settings = _settings_from(tmp_path, GOOD)
    assert (settings.bot_token, settings.signing_secret, settings.app_token) == (
        "xoxb-test-token",
        SECRET,
        "xapp-test-token",
    )
    assert (
        settings.founders == ["UBOSS"]
        and settings.allowed_channels == ["CGENERAL"]
        and settings.approvals_channel == "CAPPROVALS"
    )


def test_a_literal_token_in_the_file_is_a_config_error(tmp_path):
    text = GOOD.replace('bot_token = { "$env" = "SLACK_BOT_TOKEN" }', 'bot_token = "xoxb-1234-abcd"')
    with pytest.raises(ConfigError) as error:
        _settings_from(tmp_path, text)
    message = str(error.value)
    where = f"{tmp_path / 'thoth.toml'}:5: plugins.slack.bot_token"
    assert message.startswith(f"{where}: secrets are references, not values")
    assert "xoxb-1234-abcd" not in message


def test_file_references_are_refused_too(tmp_path):
    text = GOOD.replace(
        'signing_secret = { "$env" = "SLACK_SIGNING_SECRET" }', 'signing_secret = { "$file" = "/tmp/secret" }'
    )
    with pytest.raises(
        ConfigError, match=r"thoth.toml:6: plugins.slack.signing_secret: tokens are not kept in the file"
    ):
        _settings_from(tmp_path, text)


def test_missing_environment_variable_is_named(tmp_path, monkeypatch):
    monkeypatch.delenv("SLACK_BOT_TOKEN")
    with pytest.raises(ConfigError, match=r"plugins.slack.bot_token: environment variable SLACK_BOT_TOKEN is not set"):
        _settings_from(tmp_path, GOOD)


def test_wrong_kind_of_token_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("SLACK_APP_TOKEN", "xoxb-a-bot-token")
    with pytest.raises(
        ConfigError, match=r"plugins.slack.app_token: SLACK_APP_TOKEN should hold a token starting with 'xapp-'"
    ):
        _settings_from(tmp_path, GOOD, http=False)


def test_each_mode_needs_its_secret(tmp_path):
    with pytest.raises(ConfigError, match="HTTP mode needs signing_secret"):
        _settings_from(tmp_path, GOOD.replace('signing_secret = { "$env" = "SLACK_SIGNING_SECRET" }\n', ""), http=True)
    with pytest.raises(ConfigError, match="Socket Mode needs app_token"):
        _settings_from(tmp_path, GOOD.replace('app_token = { "$env" = "SLACK_APP_TOKEN" }\n', ""), http=False)
    with pytest.raises(ConfigError, match=r"plugins.slack.bot_token: required"):
        _settings_from(tmp_path, GOOD.replace('bot_token = { "$env" = "SLACK_BOT_TOKEN" }\n', ""))


def test_bad_values_name_their_key(tmp_path):
    with pytest.raises(ConfigError, match=r"plugins.slack.allowed_channels: expected a list of Slack ids"):
        _settings_from(tmp_path, GOOD.replace('allowed_channels = ["CGENERAL"]', 'allowed_channels = "CGENERAL"'))
    with pytest.raises(ConfigError, match=r"plugins.slack.stream_interval: expected a non-negative number"):
        _settings_from(tmp_path, GOOD + "stream_interval = -1\n")
