"""`[plugins.slack]`: tokens by environment reference only, allowed workspaces and channels.

Tokens never live in thoth.toml: `bot_token = { "$env" = "SLACK_BOT_TOKEN" }`. A literal
string there is a config error, so a token cannot be committed by accident.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thoth_core import ConfigError

if TYPE_CHECKING:
    from thoth_core import Runtime

SECRETS = {
    "bot_token": ("SLACK_BOT_TOKEN", "xoxb-"),
    "app_token": ("SLACK_APP_TOKEN", "xapp-"),
    "signing_secret": ("SLACK_SIGNING_SECRET", ""),
}
DEFAULT_API_URL = "https://slack.com/api/"
# Every key of [plugins.slack] (the core refuses others), with its default; None: none in the file.
DEFAULTS: dict[str, Any] = {
    **dict.fromkeys(SECRETS),
    "allowed_workspaces": [],
    "allowed_channels": [],
    "allow_dms": True,
    "approvals_channel": None,
    "stream_interval": 0.8,
    "api_url": DEFAULT_API_URL,
    "claim_seconds": 15.0,
}
CONFIG_DEFAULTS = {"plugins.slack": DEFAULTS}


@dataclass
class SlackSettings:
    """The validated `[plugins.slack]` table."""

    bot_token: str
    app_token: str | None = None
    signing_secret: str | None = None
    allowed_workspaces: list[str] = field(default_factory=list)
    allowed_channels: list[str] = field(default_factory=list)
    allow_dms: bool = True
    approvals_channel: str | None = None
    founders: list[str] = field(default_factory=list)
    stream_interval: float = 0.8
    api_url: str = DEFAULT_API_URL
    claim_seconds: float = 15.0  # a worker's hold on a thread lapses this long after it stopped renewing (died)

    def allows(self, team: str | None, channel: str | None) -> bool:
        """True if a request from this workspace and channel may be answered."""
        if self.allowed_workspaces and team not in self.allowed_workspaces:
            return False
        if channel and channel.startswith("D"):
            return self.allow_dms
        return not self.allowed_channels or channel is None or channel in self.allowed_channels


def load_settings(runtime: Runtime, *, http: bool) -> SlackSettings:
    """Read and check `[plugins.slack]` for Socket Mode (default) or HTTP mode."""
    config = runtime.config
    raw: dict[str, Any] = config.get("plugins.slack", {}) or {}
    secrets = {name: _secret(config, name, raw.get(name)) for name in SECRETS}
    if not secrets["bot_token"]:
        raise config.error("plugins.slack.bot_token", 'required: bot_token = { "$env" = "SLACK_BOT_TOKEN" }')
    if http and not secrets["signing_secret"]:
        raise config.error(
            "plugins.slack.signing_secret", 'HTTP mode needs signing_secret = { "$env" = "SLACK_SIGNING_SECRET" }'
        )
    if not http and not secrets["app_token"]:
        raise config.error(
            "plugins.slack.app_token",
            'Socket Mode needs app_token = { "$env" = "SLACK_APP_TOKEN" } (or use --http PORT)',
        )
    lists = {key: _strings(config, key, raw.get(key, [])) for key in ("allowed_workspaces", "allowed_channels")}
    founders = _strings(config, "thoth.founders", config.get("thoth.founders") or [], where="thoth.founders")
    interval = raw.get("stream_interval", DEFAULTS["stream_interval"])
    interval = config.number("plugins.slack.stream_interval", interval, high=60)  # seconds between message edits
    claim = config.number(
        "plugins.slack.claim_seconds", raw.get("claim_seconds", DEFAULTS["claim_seconds"]), low=1, high=3600
    )
    for key in ("approvals_channel", "api_url"):
        if key in raw and not isinstance(raw[key], str):
            raise config.error(f"plugins.slack.{key}", f"expected a string, got {raw[key]!r}")
    if not isinstance(raw.get("allow_dms", True), bool):
        raise config.error("plugins.slack.allow_dms", f"expected true or false, got {raw['allow_dms']!r}")
    return SlackSettings(
        bot_token=secrets["bot_token"],
        app_token=secrets["app_token"],
        signing_secret=secrets["signing_secret"],
        founders=founders,
        approvals_channel=raw.get("approvals_channel"),
        allow_dms=raw.get("allow_dms", True),
        stream_interval=interval,
        claim_seconds=claim,
        api_url=raw.get("api_url", DEFAULT_API_URL),
        **lists,
    )


def _secret(config: Any, name: str, value: Any) -> str | None:
    """A token from its `{ "$env" = VAR }` reference; literals are refused."""
    key = f"plugins.slack.{name}"
    variable, prefix = SECRETS[name]
    if value is None:
        return None
    if not (isinstance(value, dict) and set(value) == {"$env"} and isinstance(value["$env"], str)):
        raise config.error(
            key, f'tokens are not kept in the file; write {name} = {{ "$env" = "{variable}" }} and export {variable}'
        )
    token = os.environ.get(value["$env"], "").strip()
    if not token:
        raise config.error(key, f"environment variable {value['$env']} is not set")
    if prefix and not token.startswith(prefix):
        raise config.error(key, f"{value['$env']} should hold a token starting with {prefix!r}")
    return token


def _strings(config: Any, key: str, value: Any, *, where: str | None = None) -> list[str]:
    where = where or f"plugins.slack.{key}"
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise config.error(where, f"expected a list of Slack ids, got {value!r}")
    return list(value)


__all__ = ["CONFIG_DEFAULTS", "ConfigError", "SlackSettings", "load_settings"]
