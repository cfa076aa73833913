"""One recall over every layer, by meaning: facts, notes, MEMORY.md lines, knowledge and reflexion records.

The real layers with the shipped embedder (all-MiniLM-L6-v2 from thoth-episodic): each query below
shares no word with what it should find, or only another form of one.
"""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st
from thoth_episodic import plugin as episodic
from thoth_identity import plugin as identity
from thoth_procedural import plugin as procedural
from thoth_reflection import plugin as reflection
from thoth_working import plugin as working

from thoth_core.errors import InputError
from thoth_core.meaning import FLOOR, passages, related
from thoth_core.recall import answer_lines, fuse

LAYERS = {"working": working, "identity": identity, "episodic": episodic, "procedural": procedural}
REFLEXION = """---
date: 2026-11-21
agent: thoth
task: answer a chat turn
severity: medium
tags: model overloaded
---

## Known Issue
The model provider answered 529 overloaded and the turn failed.

## Solution
Answer briefly from the context you already have and suggest trying again in a minute.
"""


@pytest.fixture
def home_with_every_layer(tmp_path, make_runtime):
    """A project with a knowledge note, a skill, MEMORY.md lines of two peers and a reflexion record."""
    (tmp_path / "knowledge").mkdir()
    (tmp_path / "knowledge" / "ops.md").write_text(
        "# Deploying\n\nThe deploy script lives in scripts/deploy and needs the staging key.\n\n"
        "# Coffee\n\nThe office espresso machine is descaled on Mondays.\n"
    )
    (tmp_path / "persona").mkdir()
    (tmp_path / "persona" / "MEMORY.md").write_text(
        "# Memory\n\n"
        "- [2026-12-01] alice is training for a half marathon in May <!-- peer:alice ws:default -->\n"
        "- [2026-12-01] bob plays the cello in an orchestra <!-- peer:bob ws:default -->\n"
    )
    skill = tmp_path / ".claude" / "skills" / "release-notes"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: release-notes\ndescription: Write the release notes for a new version from the merged pull"
        " requests.\n---\n\n# Release notes\n\n1. List the merged pull requests since the last tag.\n"
    )
    (tmp_path / "reflexion").mkdir()
    (tmp_path / "reflexion" / "2026-11-21-model-overloaded.md").write_text(REFLEXION)

    def make(**config):
        plugins = {**LAYERS, "reflection": reflection}
        return make_runtime(plugins, root=tmp_path, config=config)  # closed after the test

    return make


async def remembered(runtime, *texts, peer="alice"):
    for text in texts:
        await runtime.turn(f"/remember {text}", peer=peer, thread="t")


async def top(runtime, query, peer="alice", **options):
    found = await runtime.recall(query=query, peer=peer, workspace="default", **options)
    assert not found.failed, found.failed
    return found.hits


async def test_every_layer_is_found_by_meaning_and_the_best_comes_first(home_with_every_layer):
    runtime = home_with_every_layer()
    await remembered(runtime, "My favourite hiking trail is the Kungsleden in Lapland", "I have a dog named Rex")
    expected = {
        "Where do I like to hike?": ("identity", "fact", "Kungsleden"),  # "hike" is not "hiking"
        "walking in the mountains": ("identity", "fact", "Kungsleden"),  # no word in common
        "animal companion": ("identity", "observation", "Rex"),
        "how do we deploy": ("procedural", "knowledge", "staging key"),
        "coffee maker cleaning": ("procedural", "knowledge", "espresso"),
        "running race": ("working", "memory", "half marathon"),
        "the provider was busy": ("reflection", "reflexion", "overloaded"),
        "announce what changed in a version": ("procedural", "skill", "release notes"),
    }
    for query, (layer, kind, words) in expected.items():
        hits = await top(runtime, query)
        assert hits, query
        best = hits[0]
        assert (best["layer"], best["kind"]) == (layer, kind) and words in best["text"], (query, hits)
        assert best["why"]["dense"] >= FLOOR and best["fused"]["layer_rank"] == 1, best
    assert await top(runtime, "What is the capital of Peru?", layer="identity") == []


async def test_one_peers_lines_and_facts_are_never_recalled_for_another(home_with_every_layer):
    runtime = home_with_every_layer()
    await remembered(runtime, "My favourite hiking trail is the Kungsleden in Lapland")
    for query in ("cello orchestra", "hiking trail Kungsleden", "half marathon"):
        seen = {"alice": await top(runtime, query), "bob": await top(runtime, query, peer="bob")}
        assert not any("cello" in h["text"] for h in seen["alice"]), seen
        assert not any("Kungsleden" in h["text"] or "marathon" in h["text"] for h in seen["bob"]), seen
    assert "cello" in (await top(runtime, "cello orchestra", peer="bob"))[0]["text"]


async def test_without_an_embedder_words_alone_match_and_the_log_says_so_once(home_with_every_layer, caplog):
    runtime = home_with_every_layer(thoth={"embedder": "none"})
    await remembered(runtime, "My favourite hiking trail is the Kungsleden in Lapland")
    [hit] = await top(runtime, "Where do I like to hike?", layer="identity")  # the stem still joins them
    assert hit["why"]["dense"] is None and hit["why"]["words"] == ["hike"]
    assert await top(runtime, "walking in the mountains", layer="identity") == []
    runtime = home_with_every_layer(thoth={"embedder": "no-such-model"})
    with caplog.at_level(logging.WARNING, logger="thoth_core.meaning"):
        for _ in range(3):
            await top(runtime, "how do we deploy")
    lines = [r.getMessage() for r in caplog.records if r.name == "thoth_core.meaning"]
    assert lines == [
        "recall by meaning is off: no plugin registers the embedder 'no-such-model' ([thoth] embedder); "
        "layers match by words alone"
    ]


async def test_forget_leaves_no_vector_in_memory(home_with_every_layer):
    runtime = home_with_every_layer()
    await remembered(runtime, "My favourite hiking trail is the Kungsleden in Lapland")
    await top(runtime, "Where do I like to hike?")
    assert len(runtime.meaning) > 0
    await runtime.forget(peer="alice")
    assert len(runtime.meaning) == 0
    assert not any("Kungsleden" in h["text"] for h in await top(runtime, "Where do I like to hike?"))


async def test_the_recall_command_and_its_usage(home_with_every_layer):
    runtime = home_with_every_layer()
    await remembered(runtime, "My favourite hiking trail is the Kungsleden in Lapland")
    reply = (await runtime.turn("/recall walking in the mountains", peer="alice", thread="t")).reply.text
    lines = reply.splitlines()
    assert lines[0] == "1 memories of alice matching 'walking in the mountains':", reply
    assert lines[1] == "1. [identity fact] favourite hiking trail: the Kungsleden in Lapland"
    assert lines[2].startswith("   #1 in its layer, #1 by meaning (dense 0.")
    assert (await runtime.turn("/recall", peer="alice", thread="t")).reply.text == "usage: /recall QUERY"


def test_a_documents_passages_join_headings_and_drop_front_matter_and_comments():
    assert passages(REFLEXION) == [
        "Known Issue: The model provider answered 529 overloaded and the turn failed.",
        "Solution: Answer briefly from the context you already have and suggest trying again in a minute.",
    ]
    assert passages("one\n\n<!-- thoth:notes -->\n\ntwo\nlines") == ["one", "two lines"]


def test_a_shared_word_counts_only_where_the_meaning_does_not_deny_it():
    assert related(FLOOR, []) and not related(FLOOR - 0.01, [])
    assert related(FLOOR / 2, ["run"]) and not related(FLOOR / 2 - 0.01, ["run"])
    assert related(None, ["run"]) and not related(None, [])


def hit(plugin, rank, cosine):
    return {"id": f"{plugin}{rank}", "text": "x", "why": {"dense": cosine}}


lists = st.lists(st.lists(st.one_of(st.none(), st.floats(-1, 1)), max_size=6), max_size=4)


@given(lists, st.integers(1, 30))
def test_fusing_keeps_each_layers_order_and_takes_the_best_next_by_meaning(cosines, limit):
    ranked = [[hit(p, r, c) for r, c in enumerate(layer)] for p, layer in enumerate(cosines)]
    fused = fuse(ranked, limit)
    assert len(fused) == min(limit, sum(map(len, ranked)))
    for p, layer in enumerate(ranked):
        mine = [h["id"] for h in fused if h["id"].startswith(f"{p}")]
        assert mine == [h["id"] for h in layer][: len(mine)]  # a layer's own order stands
    if all((c or 0.0) < FLOOR for layer in cosines for c in layer):  # none related: each layer's first, second, ...
        order = sorted(((r, p) for p, layer in enumerate(ranked) for r in range(len(layer))))
        assert [h["id"] for h in fused] == [f"{p}{r}" for r, p in order][:limit]
    firsts = [(c, p) for p, layer in enumerate(cosines) if layer and (c := layer[0]) is not None and c >= FLOOR]
    if (
        fused
        and firsts
        and max(firsts)[0] > max((c for layer in cosines for c in layer[1:] if c is not None), default=-2)
    ):
        best = max(firsts, key=lambda cp: (cp[0], -cp[1]))
        assert fused[0]["id"] == f"{best[1]}0" and fused[0]["fused"]["meaning_rank"] == 1


def test_an_answer_says_who_and_each_hit_in_two_lines():
    found = {
        "peer": "ann",
        "query": "q",
        "hits": fuse(
            [[{"layer": "identity", "kind": "fact", "text": "a  b", "why": {"dense": 0.5, "words": ["b"]}, "at": 0}]], 5
        ),
        "failed": [],
    }
    assert answer_lines(found) == [
        "1 memories of ann matching 'q':",
        "1. [identity fact] a b",
        "   #1 in its layer, #1 by meaning (dense 0.5; words b)",
    ]
    assert answer_lines({**found, "hits": []}) == ["Nothing of ann's matches."]


async def test_an_unknown_layer_or_an_empty_query_is_one_line_naming_it(home_with_every_layer):
    runtime = home_with_every_layer()
    with pytest.raises(InputError) as bad_layer:
        await runtime.recall(query="deploy", peer="alice", layer="episodes")
    assert str(bad_layer.value) == (
        "layer: nothing named 'episodes' recalls here; one of: episodic, identity, procedural, reflection, working"
    )
    with pytest.raises(InputError, match="^query: required, a non-empty text$"):
        await runtime.recall(query="  ", peer="alice")
    assert {h["layer"] for h in await top(runtime, "how do we deploy", layer="procedural")} == {"procedural"}
