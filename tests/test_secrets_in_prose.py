"""Secrets said in chat prose (`my password is …`) and detect-secrets' wider shapes are redacted; talk is not."""

from __future__ import annotations

import pytest

from thoth_core.redact import find_secrets, redact


@pytest.mark.parametrize(
    ("text", "value", "kind"),
    [
        ("my password is Xk9fQ2mLp0zz", "Xk9fQ2mLp0zz", "assigned-secret"),
        ("the wifi pass is hunter2hunter, ask Bob", "hunter2hunter", "assigned-secret"),
        ("Our DB_PASSWORD was 'q8Fv2LmZ0pRt' until Monday", "q8Fv2LmZ0pRt", "assigned-secret"),
        ("the api key is 9f8e7d6c5b4a39281706f5e4d3c2b1a0.", "9f8e7d6c5b4a39281706f5e4d3c2b1a0", "assigned-secret"),
        ("artifactory AKCp8bQ2x7Lm9Zt4Rw1Vy6Ns3Kd", "AKCp8bQ2x7Lm9Zt4Rw1Vy6Ns3Kd", "artifactory-key"),
        ("artifactory password AP6xQ2b7Lm9Zt4Rw1Vy6Ns3Kd8", "AP6xQ2b7Lm9Zt4Rw1Vy6Ns3Kd8", "artifactory-key"),
    ],
)
def test_a_secret_said_in_prose_is_replaced(text, value, kind):
    assert redact(text) == text.replace(value, f"[REDACTED:{kind}]")
    assert find_secrets(text) == [kind]


@pytest.mark.parametrize(
    "text",
    [
        "the password is under the mat",
        "the password is required at login",
        "my password is the same as last year",
        "the token was expired again",
        "the api key is in the vault, ask Ann",
        "the secret is to let the dough rest",
        "this password is 12 characters long",
        "APAC2024 numbers are in; AKC shows are on Sunday",
        "the passcode is 1234",
    ],
)
def test_talking_about_passwords_and_keys_is_kept(text):
    assert redact(text) == text
