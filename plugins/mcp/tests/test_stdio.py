"""`thoth mcp` over stdio, driven by the `mcp` SDK's own client: tools, peer isolation, resources."""

from __future__ import annotations

import json
import uuid

import pytest

from thoth_core.memory_tools import SCHEMAS

TOOLS = {
    "recall",
    "remember",
    "correct",
    "forget",
    "context",
    "approvals_list",
    "approve",
    "reject",
    "skills_list",
    "skill_load",
}
SKILL = "recall-before-answering"  # one of the skills `thoth init` installs


def codeword() -> str:
    return f"Quill{uuid.uuid4().hex[:8]}"


def hit_texts(result):
    return [hit["text"] for hit in result.structured_content["hits"]]


def test_the_server_lists_every_tool_with_a_description_and_a_schema(server):
    tools = {tool.name: tool for tool in server.call("list_tools").tools}
    assert set(tools) == TOOLS
    assert all(tool.description and tool.input_schema["type"] == "object" for tool in tools.values())
    assert "query" in tools["recall"].input_schema["required"]
    assert "peer" in tools["remember"].input_schema["properties"]
    assert "confirm" in tools["forget"].input_schema["properties"]
    assert "confirm is true" in tools["forget"].description
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["recall"].annotations.read_only_hint is True


def test_what_alice_remembers_alice_recalls_and_bob_cannot(server):
    word = codeword()
    remembered = server.tool("remember", text=f"I keep bees named {word}", peer="alice")
    assert not remembered.is_error, server.text(remembered)
    assert remembered.structured_content["peer"] == "alice"

    found = server.tool("recall", query=f"bees {word}", peer="alice")
    assert not found.is_error, server.text(found)
    assert any(word in text for text in hit_texts(found)), server.text(found)
    assert not found.structured_content["failed"], found.structured_content["failed"]
    hit = next(h for h in found.structured_content["hits"] if word in h["text"])
    assert hit["layer"] == "identity" and isinstance(hit["score"], int | float) and hit["why"]
    assert word in server.text(found) and "in its layer" in server.text(found) and "dense" in server.text(found)

    as_bob = server.tool("recall", query=f"bees {word}", peer="bob")
    assert not as_bob.is_error, server.text(as_bob)
    assert not any(word in text for text in hit_texts(as_bob))
    assert word not in server.text(as_bob)


def test_remember_in_plain_words_makes_facts_that_supersede_and_link_for_that_peer_only(server):
    peer, other = f"dee{uuid.uuid4().hex[:6]}", f"eve{uuid.uuid4().hex[:6]}"
    said = [
        server.text(server.tool("remember", text=text, peer=peer))
        for text in ("I work at Acme", "I work at Globex", "my sister Ann lives in Oslo", "I work at it every day")
    ]
    assert said == [
        "Remembered: employer = Acme",
        "Remembered: employer = Globex (was: Acme)",
        "Remembered: sister = Ann; Ann's location = Oslo",
        f"Noted about {peer}: I work at it every day",
    ]
    context = server.tool("context", message="Ann visits on Friday", peer=peer)
    assert not context.is_error, server.text(context)
    [block] = [b for b in context.structured_content["blocks"] if b["tag"] == "user-model"]
    assert "- employer: Globex" in block["text"] and "Acme" not in block["text"]
    assert "- sister: Ann" in block["text"] and "- Ann, location: Oslo" in block["text"]
    theirs = server.tool("context", message="Ann visits on Friday", peer=other)
    assert "Oslo" not in server.text(theirs) and "Globex" not in server.text(theirs)


def test_a_server_pinned_to_alice_answers_for_her_and_refuses_bob(server, alice_server):
    word = codeword()
    assert not server.tool("remember", text=f"my cat is called {word}", peer="alice").is_error

    own = alice_server.tool("recall", query=f"cat {word}")  # the pinned peer may be left out
    assert any(word in text for text in hit_texts(own)), alice_server.text(own)

    refused = alice_server.tool("recall", query=f"cat {word}", peer="bob")
    assert refused.is_error
    assert alice_server.text(refused) == ("recall: peer: 'bob' refused; this server is pinned to peer 'alice' (--peer)")
    assert refused.structured_content is None
    written = alice_server.tool("remember", text="bob likes tea", peer="bob")
    assert written.is_error and "pinned to peer 'alice'" in alice_server.text(written)
    assert "tea" not in server.text(server.tool("recall", query="bob likes tea", peer="bob"))


def test_bad_input_is_a_one_line_tool_error_and_the_server_keeps_running(server):
    cases = [
        ("recall", {"query": "bees", "peer": "../alice"}, "recall: peer: '../alice' is not a valid name"),
        ("recall", {"query": "bees"}, "recall: peer: required"),
        ("recall", {"query": "bees", "peer": "alice", "limit": 0}, "recall: limit: expected 1 to 20, got 0"),
        ("remember", {"text": "  ", "peer": "alice"}, "remember: text: required"),
        ("context", {"message": "hi", "peer": "alice", "workspace": "a/b"}, "context: workspace: 'a/b' is not"),
    ]
    for name, arguments, expected in cases:
        result = server.tool(name, **arguments)
        assert result.is_error, (name, arguments)
        text = server.text(result)
        assert text.startswith(expected) and "\n" not in text, text
    assert len(server.call("list_tools").tools) == len(TOOLS)


def test_correct_takes_the_core_schema_and_holds_the_change_for_approval(server):
    pytest.importorskip("thoth_reflection", reason="a correction waits in the reflection layer's approval queue")
    listed = {tool.name: tool for tool in server.call("list_tools").tools}["correct"].input_schema
    core = SCHEMAS["correct"]["input_schema"]
    for key, spec in core["properties"].items():  # pydantic adds a title, the core's type and description stay
        assert spec.items() <= listed["properties"][key].items(), (key, listed["properties"][key])
    assert listed["required"] == core["required"]
    recall = {tool.name: tool for tool in server.call("list_tools").tools}["recall"].input_schema
    assert (
        recall["properties"]["limit"]["maximum"] == SCHEMAS["recall"]["input_schema"]["properties"]["limit"]["maximum"]
    )

    peer, other = f"fay{uuid.uuid4().hex[:6]}", f"gus{uuid.uuid4().hex[:6]}"
    assert not server.tool("remember", text="I work at Acme", peer=peer).is_error
    found = server.tool("recall", query="employer Acme", peer=peer)
    record = next(hit["id"] for hit in found.structured_content["hits"] if "Acme" in hit["text"])
    assert f"(id {record})" in server.text(found)
    held = server.tool("correct", id=record, text="I work at Globex", peer=peer)  # recall's id is the record's
    assert not held.is_error, server.text(held)
    assert server.text(held).startswith("held for approval as ") and "/approve" in server.text(held)
    items = server.tool("approvals_list", peer=peer).structured_content["items"]
    [item] = [item for item in items if item["id"] in server.text(held)]
    assert item["kind"] == "correction" and record in item["title"] and item["body"] == "I work at Globex"
    assert "Acme" in server.text(server.tool("recall", query="employer Acme", peer=peer))  # not applied yet

    foreign = server.tool("correct", id=record, text="I work at Initech", peer=other)
    assert foreign.is_error
    assert server.text(foreign) == f"correct: {other} has no record {record!r}; recall gives the ids"


def test_context_shows_each_block_with_its_layer_and_tokens(server):
    result = server.tool("context", message="what did we decide about the release?", peer="alice")
    assert not result.is_error, server.text(result)
    data = result.structured_content
    tags = {block["tag"] for block in data["blocks"]}
    assert {"persona", "skills"} <= tags
    for block in data["blocks"]:
        assert set(block) >= {"tag", "layer", "plugin", "stable", "tokens", "text"}
        assert isinstance(block["tokens"], int) and block["tokens"] > 0
    assert data["tokens"] == sum(block["tokens"] for block in data["blocks"]) <= data["budget"]
    assert isinstance(data["cuts"], list)
    persona = next(block for block in data["blocks"] if block["tag"] == "persona")
    assert persona["layer"] == "procedural" and persona["stable"] is True
    assert f"--- persona (procedural, stable, {persona['tokens']} tokens)" in server.text(result)


def test_skills_are_listed_and_loaded_by_slug(server):
    listed = server.tool("skills_list", peer="alice")
    assert not listed.is_error, server.text(listed)
    skills = {skill["slug"]: skill["description"] for skill in listed.structured_content["skills"]}
    assert SKILL in skills and skills[SKILL]
    assert f"/skill {SKILL} - " in server.text(listed)

    loaded = server.tool("skill_load", slug=SKILL, peer="alice")
    assert not loaded.is_error, server.text(loaded)
    assert f"name: {SKILL}" in server.text(loaded)
    assert loaded.structured_content == {"slug": SKILL, "text": server.text(loaded)}

    unknown = server.tool("skill_load", slug="no-such-skill", peer="alice")
    assert unknown.is_error
    assert server.text(unknown) == (
        f"skill_load: slug: unknown skill 'no-such-skill'; installed: {', '.join(sorted(skills))}"
    )


def test_approvals_are_listed_and_an_unknown_item_is_a_clear_error(server):
    listed = server.tool("approvals_list", peer="alice")
    assert not listed.is_error, server.text(listed)
    assert listed.structured_content["items"] == []
    assert server.text(listed) == "Nothing is waiting for approval."
    for tool in ("approve", "reject"):
        result = server.tool(tool, item_id="skill:no-such-draft", peer="alice", reason="test")
        assert result.is_error
        assert server.text(result) == f"{tool}: no pending item 'skill:no-such-draft'"


def test_forget_needs_confirm_returns_a_receipt_and_then_nothing_is_recalled(server):
    word = codeword()
    assert not server.tool("remember", text=f"I grow roses named {word}", peer="carol").is_error
    assert any(word in t for t in hit_texts(server.tool("recall", query=f"roses {word}", peer="carol")))

    unconfirmed = server.tool("forget", peer="carol")
    assert unconfirmed.is_error and "confirm: must be true" in server.text(unconfirmed)
    assert any(word in t for t in hit_texts(server.tool("recall", query=f"roses {word}", peer="carol")))

    forgotten = server.tool("forget", peer="carol", confirm=True)
    assert not forgotten.is_error, server.text(forgotten)
    receipt = forgotten.structured_content["receipt"]
    assert receipt.get("identity"), receipt
    assert server.text(forgotten).startswith("Forgot peer carol in workspace default:")
    after = server.tool("recall", query=f"roses {word}", peer="carol")
    assert not after.is_error and after.structured_content["hits"] == []


def test_resources_list_and_read_the_persona_and_the_skills(server):
    listed = {str(resource.uri): resource for resource in server.call("list_resources").resources}
    assert set(listed) == {"thoth://persona", "thoth://skills"}
    assert listed["thoth://persona"].mime_type == "text/markdown"

    persona = server.call("read_resource", "thoth://persona").contents[0].text
    assert persona.startswith("<persona>") and "<skills>" in persona
    assert "<user-model>" not in persona and "<memory>" not in persona  # nothing peer-specific

    skills = json.loads(server.call("read_resource", "thoth://skills").contents[0].text)
    assert SKILL in {skill["slug"] for skill in skills["skills"]}
