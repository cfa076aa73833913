"""One text, one vector: an episode's embedding is the same whichever path computes it, and its own.

Paths: a turn's post-turn write, a bundle imported into a fresh home, a re-embedding of the store
(`thoth episodes reindex`). The real default embedder (MiniLM, shipped in the wheel) computes each.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import memory_for

from thoth_core.bundle import export_bundle, import_bundle, open_bundle
from thoth_core.testing import make_test_runtime

SUBJECTS = ["the staging database", "my sister Ann", "the invoice run", "our dog Biscuit", "the office wifi"]
CHANGES = [
    "moved to a new host",
    "is away until Friday",
    "needs a second approval",
    "was ill last week",
    "keeps dropping",
]
QUERIES = [
    f"{word} {other}"
    for word in ("what about", "news on", "trouble with", "when did", "who handles")
    for other in ("staging", "sister", "invoices", "pet", "wifi", "approval", "host", "Friday", "ill", "network")
]
NOW = time.time() + 3600  # one moment for every ranking (recency is part of the score)


def turns() -> list[tuple[str, str]]:
    """Forty turns in four threads: (thread, message)."""
    return [(f"t{i % 4}", f"Note {i}: {SUBJECTS[i % 5]} {CHANGES[(i * 3) % 5]} ({i * 7} entries).") for i in range(40)]


def top_tens(runtime) -> list[list[tuple[str, float | None]]]:
    """The top ten of each query: episode id and dense score."""
    memory = memory_for(runtime)
    return [
        [
            (hit.episode.id, None if hit.dense is None else round(hit.dense, 5))
            for hit in memory.recall(query, workspace="default", peer="ann", k=10, now=NOW)
        ]
        for query in QUERIES
    ]


@pytest.fixture
def source(tmp_path: Path):
    runtime = make_test_runtime(tmp_path / "a", {"episodic": plugin}, replies=[{"reply": "Noted."}])

    async def fill() -> None:
        for thread, text in turns():
            await runtime.turn(text, peer="ann", thread=thread)
        await runtime.drain()

    asyncio.run(fill())
    memory_for(runtime).flush()
    yield runtime
    asyncio.run(runtime.aclose())


def test_a_bundle_imported_into_a_fresh_home_ranks_fifty_queries_the_same(source, tmp_path):
    before = top_tens(source)
    assert len(QUERIES) == 50 and all(before) and any(hit[1] is not None for hits in before for hit in hits)
    path = tmp_path / "ann.thoth.tar.gz"
    export_bundle(source, path)
    target = make_test_runtime(tmp_path / "b", {"episodic": plugin}, replies=[{"reply": "Noted."}])
    bundle = open_bundle(path)
    try:
        import_bundle(target, bundle, merge=False)
    finally:
        bundle.close()
    try:
        assert top_tens(target) == before
    finally:
        asyncio.run(target.aclose())


def test_reembedding_the_store_changes_no_vector(source):
    before = top_tens(source)
    assert memory_for(source).reindex() == 40
    assert top_tens(source) == before


def test_a_neighbours_words_do_not_make_it_outrank_the_turn_that_says_them(tmp_path):
    runtime = make_test_runtime(tmp_path, {"episodic": plugin}, replies=[{"reply": "Noted."}])

    async def fill() -> None:
        await runtime.turn("My dog Biscuit is a four year old beagle.", peer="ann", thread="t")
        await runtime.turn("The quarterly report is due on the ninth.", peer="ann", thread="t")
        await runtime.drain()

    try:
        asyncio.run(fill())
        memory_for(runtime).flush()
        for query in ("pet dog", "animal companion", "beagle"):
            [first, *_] = memory_for(runtime).recall(query, workspace="default", peer="ann", k=2)
            assert "Biscuit" in first.episode.user, query
    finally:
        asyncio.run(runtime.aclose())
