from __future__ import annotations

from typing import Any

import pytest
import thoth_slack.plugin
from thoth_slack.bridge import SlackBridge
from thoth_slack.settings import load_settings
from thoth_slack.testing import SECRET, FakeSlackAPI, Harness

SLACK_CONFIG = {
    "bot_token": {"$env": "SLACK_BOT_TOKEN"},
    "app_token": {"$env": "SLACK_APP_TOKEN"},
    "signing_secret": {"$env": "SLACK_SIGNING_SECRET"},
    "approvals_channel": "CAPPROVALS",
    "stream_interval": 0,
}


@pytest.fixture(autouse=True)
def _clean_env(thoth_env, monkeypatch):
    """A clean environment (see `thoth_env`) with test Slack tokens and no other SLACK_* variable."""
    import os

    for name in list(os.environ):
        if name.startswith("SLACK_"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-test-token")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-test-token")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SECRET)


@pytest.fixture
def fake_slack():
    fake = FakeSlackAPI()
    yield fake
    fake.close()


@pytest.fixture
def make_slack(make_runtime, fake_slack):
    """Factory: a started bridge on a runtime with the slack plugin plus the given ones."""
    bridges: list[SlackBridge] = []

    def factory(
        plugins: dict[str, object] | None = None,
        *,
        slack: dict[str, Any] | None = None,
        founders: list[str] | None = None,
        thoth: dict[str, Any] | None = None,
        http: bool = True,
        **kwargs: Any,
    ) -> Harness:
        extra = kwargs.pop("config", {})  # other plugins' tables go next to slack's
        config = {
            **extra,
            "plugins": {
                "slack": {**SLACK_CONFIG, "api_url": fake_slack.url, **(slack or {})},
                **extra.get("plugins", {}),
            },
            "thoth": {"founders": founders or [], **(thoth or {})},
        }
        config["plugins"]["slack"] = {k: v for k, v in config["plugins"]["slack"].items() if v is not None}
        runtime = make_runtime({"slack": thoth_slack.plugin, **(plugins or {})}, config=config, **kwargs)
        bridge = SlackBridge(runtime, load_settings(runtime, http=http))
        bridge.start()
        bridges.append(bridge)
        return Harness(bridge, fake_slack)

    yield factory
    for bridge in bridges:
        bridge.stop()
