"""Peer, workspace and thread names are checked, and a pinned server refuses other peers."""

from __future__ import annotations

import pytest
from thoth_mcp.scope import thread_for
from thoth_mcp.serve import is_loopback

from thoth_core.scope import Scope, ScopeError, valid_name


@pytest.mark.parametrize("name", ["alice", "U024BE7LH", "ada.lovelace@example.org", "team:ops", "_bot", "a" * 128])
def test_reasonable_names_are_accepted(name):
    assert valid_name("peer", name) == name


@pytest.mark.parametrize("name", ["", "  ", "../etc", "a/b", "-rf", ".hidden", "has space", "a" * 129, "x\ny", None, 7])
def test_other_names_are_refused_in_one_line_naming_the_key(name):
    with pytest.raises(ScopeError) as refused:
        valid_name("peer", name)
    message = str(refused.value)
    assert message.startswith("peer: ") and "\n" not in message


def test_an_unpinned_scope_needs_a_peer_in_every_call():
    scope = Scope(default_workspace="home")
    assert scope.peer_for("bob") == "bob"
    with pytest.raises(ScopeError, match="peer: required"):
        scope.peer_for(None)
    assert scope.workspace_for(None) == "home"
    assert scope.workspace_for("lab") == "lab"


def test_a_pinned_scope_fills_in_its_peer_and_refuses_others():
    scope = Scope(peer="alice", workspace="lab")
    assert scope.peer_for(None) == "alice"
    assert scope.peer_for("alice") == "alice"
    with pytest.raises(ScopeError, match="'bob' refused; this server is pinned to peer 'alice'"):
        scope.peer_for("bob")
    assert scope.workspace_for(None) == "lab"
    with pytest.raises(ScopeError, match="workspace: 'home' refused"):
        scope.workspace_for("home")


def test_a_bad_pin_is_refused_naming_the_option():
    with pytest.raises(ScopeError, match="^--peer: "):
        Scope(peer="a b")


def test_writes_go_to_the_mcp_thread_unless_one_is_named():
    assert thread_for(None) == "mcp"
    assert thread_for("notes") == "notes"
    with pytest.raises(ScopeError, match="^thread: "):
        thread_for("a/b")


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.0.0.2", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("192.168.1.4", False),
        ("example.org", False),
    ],
)
def test_loopback_addresses_are_told_apart(host, loopback):
    assert is_loopback(host) is loopback
