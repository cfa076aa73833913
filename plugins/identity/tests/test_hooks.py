"""Each hookimpl called directly (the runtime-level tests live in test_embedded and test_honcho)."""

from __future__ import annotations

import click
from thoth_identity import plugin
from thoth_identity.honcho_backend import HonchoBackend, honcho_id, session_id
from thoth_identity.settings import IdentitySettings

from thoth_core import Reply, Turn


async def test_hooks_directly(make_runtime):
    runtime = make_runtime({"identity": plugin})
    database = runtime.home / "identity" / "identity.db"
    assert not database.exists()  # configure made no backend: commands that never use the layer pay nothing
    session = await runtime.session(peer="ann", thread="t")
    assert await plugin.pre_spawn_context(turn=Turn("hi", "ann", "t"), session=session) is None  # nothing held yet
    assert database.exists()
    done = await plugin.feedback(kind="identity", turn_id="x", text="I live in Oslo", actor="ann", session=session)
    assert done == {"action": "note", "message": "Noted about ann: I live in Oslo"}
    await plugin._remember("I live in Oslo", session=session, runtime=runtime)
    assert await plugin.feedback(kind="forget", turn_id="x", text="my name is X", actor="ann", session=session) is None
    assert await plugin.feedback(kind="remember", turn_id="x", text="  ", actor="ann", session=session) is None
    await plugin.post_turn_write(turn=Turn("I like fjords", "ann", "t"), reply=Reply("nice"), session=session)
    block = await plugin.pre_spawn_context(turn=Turn("where do I live?", "ann", "t"), session=session)
    assert block.tag == "user-model" and "- location: Oslo" in block.text
    status = await plugin.layer_status(workspace="default", peer="ann", runtime=runtime)
    assert (status["layer"], status["facts"], status["messages"]) == ("identity", 1, 2)
    assert await plugin.forget(peer="ann", thread="t", workspace="default", runtime=runtime, wait=0) == {"messages": 2}
    assert await plugin.forget(peer="ann", thread=None, workspace="default", runtime=runtime, wait=0) == {
        "facts": 1,
        "observations": 1,
    }
    assert await plugin.forget(peer="ann", thread=None, workspace="default", runtime=runtime, wait=0) is None


def test_registrations():
    commands, group = [], click.Group()
    plugin.register_commands(register=commands.append)
    assert [c.name for c in commands] == ["remember", "correct"]
    plugin.register_cli_commands(cli=group)
    assert sorted(group.commands["identity"].commands) == [
        "delete",
        "edit",
        "entity",
        "export",
        "forget",
        "import",
        "show",
    ]


def test_honcho_names(make_runtime):
    assert honcho_id("ann") == "ann" and honcho_id("ann-t_1") == "ann-t_1"
    assert honcho_id("ann@example.com").startswith("ann_example_com-") and honcho_id("a b") != honcho_id("a_b")
    assert session_id("ann-b", "t1") != session_id("ann", "b-t1") and session_id("ann", "t1").startswith("ann-t1-")
    assert session_id("a" * 300, "t") != session_id("a" * 300, "u") and len(session_id("a" * 300, "t")) <= 100
    runtime = make_runtime()
    backend = HonchoBackend(
        runtime, IdentitySettings(backend="honcho", base_url="http://127.0.0.1:9", workspace="acme"), None
    )
    assert backend.workspace_id("default") == "acme" and backend.workspace_id("team") == "acme-team"
