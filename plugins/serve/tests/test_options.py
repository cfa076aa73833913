"""The service's options: the token's sources, the bind rule, the workers' hand-over; the Host check's parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from thoth_serve.auth import host_name, presented_token, same_token
from thoth_serve.options import ServeOptions, is_loopback, read_token

from thoth_core.errors import ThothError


def test_the_token_comes_from_the_file_else_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("THOTH_TOKEN", " from-env \n")
    assert read_token(None) == "from-env"
    path = tmp_path / "token"
    path.write_text("from-file\nignored\n")
    assert read_token(path) == "from-file"
    monkeypatch.delenv("THOTH_TOKEN")
    assert read_token(None) is None


@pytest.mark.parametrize("content", [None, "", "\n\n"])
def test_a_missing_or_empty_token_file_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ThothError) as refused:
        read_token(path)
    assert str(refused.value).startswith(f"--token-file {path}: ") and "\n" not in str(refused.value)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_loopback_binds_need_no_token(host):
    assert is_loopback(host) and ServeOptions(host=host).check().loopback


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.4", "example.org"])
def test_other_binds_need_a_token(host):
    with pytest.raises(ThothError, match="not a loopback address, and no token is set"):
        ServeOptions(host=host).check()
    assert not ServeOptions(host=host, token="t").check().loopback


def test_a_cors_origin_must_be_an_origin():
    with pytest.raises(ThothError, match="--cors-origin 'example.org'"):
        ServeOptions(cors_origins=("example.org",)).check()


def test_the_workers_get_the_parents_options(monkeypatch):
    options = ServeOptions(port=4711, token="t", peer="ada", cors_origins=("https://a.example",), config="/x.toml")
    monkeypatch.setenv("THOTH_SERVE_OPTIONS", options.to_env())
    assert ServeOptions.from_env() == options
    monkeypatch.delenv("THOTH_SERVE_OPTIONS")
    assert ServeOptions.from_env() == ServeOptions()


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1:8766", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]:80", "[::1]"),
        ("evil.example:1", "evil.example"),
    ],
)
def test_the_host_header_is_read_without_its_port(host, name):
    assert host_name(host) == name


@given(st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=";,\\\""), min_size=1))
def test_a_bearer_token_is_read_back_as_sent_and_compared_exactly(token):
    assert presented_token({"authorization": f"Bearer {token}"}) == token
    assert same_token(token, token) and not same_token(token + "x", token) and not same_token(None, token)
