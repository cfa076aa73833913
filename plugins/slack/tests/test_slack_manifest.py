"""The app manifest asks for every event the bridge listens to and every scope its API calls need."""

from __future__ import annotations

from pathlib import Path

import yaml
from thoth_slack.cards import APPROVE
from thoth_slack.testing import dm, mention

MANIFEST_FILE = Path(__file__).parents[1] / "thoth_slack" / "manifest.yaml"  # package data: in the wheel
MANIFEST = yaml.safe_load(MANIFEST_FILE.read_text())
SCOPE_OF = {
    "auth.test": None,
    "chat.postMessage": "chat:write",
    "chat.update": "chat:write",
    "chat.postEphemeral": "chat:write",
    "conversations.open": "im:write",
    "apps.connections.open": None,  # the app-level token's connections:write
}


def test_manifest_subscribes_to_what_the_bridge_handles():
    settings = MANIFEST["settings"]
    assert set(settings["event_subscriptions"]["bot_events"]) >= {
        "app_mention",
        "message.im",
        "message.channels",
        "reaction_added",
    }
    assert settings["interactivity"]["is_enabled"] and settings["socket_mode_enabled"]
    scopes = set(MANIFEST["oauth_config"]["scopes"]["bot"])
    assert {"app_mentions:read", "im:history", "channels:history", "reactions:read"} <= scopes


def test_manifest_scopes_cover_every_api_call_the_bridge_makes(make_slack):
    slack = make_slack(founders=["UBOSS"])
    slack.send(mention("hello"))
    slack.send(dm("hi"))
    slack.bridge.deliver("persona_observation", {"item_id": "persona:1", "text": "obs"})
    card = slack.fake.calls_to("chat.postMessage")[-1]
    slack.click(APPROVE, "persona:1", user="UINTERN", channel=card["channel"], ts=card["_ts"])
    called = {method for method, _, _ in slack.fake.calls}
    assert called >= {"chat.postMessage", "chat.update", "chat.postEphemeral", "conversations.open"}
    scopes = set(MANIFEST["oauth_config"]["scopes"]["bot"])
    assert {SCOPE_OF[method] for method in called} - {None} <= scopes


def test_thoth_slack_manifest_prints_the_packaged_manifest(monkeypatch):
    from click.testing import CliRunner

    from thoth_core.cli import ThothGroup

    monkeypatch.setenv("THOTH_LOAD_PLUGINS", "slack")
    result = CliRunner().invoke(ThothGroup("thoth"), ["slack", "manifest"])
    assert result.exit_code == 0, result.output
    assert result.output == MANIFEST_FILE.read_text()
    assert yaml.safe_load(result.output) == MANIFEST
