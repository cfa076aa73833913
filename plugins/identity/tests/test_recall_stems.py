"""Facts are matched to a query by their words' stems, as observations are by FTS5's porter tokenizer."""

from __future__ import annotations

from thoth_identity import plugin
from thoth_identity.render import relevant_facts

from thoth_core.words import word_stems

KUNGSLEDEN = "My favourite hiking trail is the Kungsleden in Lapland"


async def recalled(runtime, query):
    outcomes = await runtime.call("recall", query=query, peer="alice", workspace="default", limit=5, runtime=runtime)
    return [hit["text"] for _, hits, _ in outcomes for hit in hits or [] if hit["kind"] == "fact"]


async def test_a_remembered_fact_is_recalled_by_another_form_of_its_words(make_runtime):
    runtime = make_runtime({"identity": plugin})
    reply = await runtime.turn(f"/remember {KUNGSLEDEN}", peer="alice", thread="t")
    assert "hiking trail" in reply.reply.text, reply.reply.text
    for query in ("Where do I like to hike?", "hiking trail", "any hikes planned?", "trails I walked"):
        assert any("Kungsleden" in text for text in await recalled(runtime, query)), query
    assert await recalled(runtime, "What should I cook tonight?") == []


def test_the_block_picks_a_fact_sharing_a_stem_with_the_message():
    facts = [
        {"predicate": "favourite_hiking_trail", "object": "Kungsleden in Lapland", "valid_from": 1.0},
        {"predicate": "employer", "object": "Acme", "valid_from": 2.0},
    ]
    [chosen] = relevant_facts(facts, "Where do I like to hike this summer?", others=0)
    assert chosen["object"] == "Kungsleden in Lapland"


def test_stems_join_the_forms_of_a_word_and_drop_stopwords():
    assert word_stems("hiking hikes hiked") == word_stems("hike") == {"hike"}
    assert word_stems("Where do I like to run?") == {"run"}
