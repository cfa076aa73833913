"""PostgreSQL's full-text stage weighs each word by its rarity, as BM25 does, not by `ts_rank` alone."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from thoth_episodic import postgres_fts
from thoth_episodic.contract import episode, query
from thoth_episodic.postgres_fts import idf


@pytest.fixture
def store(storage_url: str) -> Iterator[object]:
    """200 rows holding `apple`, one saying it four times, one row holding `zebra`."""
    from thoth_episodic.postgres_store import SCHEMA, PostgresStore

    opened = PostgresStore(storage_url, schema=SCHEMA, ann="exact")
    rows = [episode(f"apple note {i}") for i in range(200)]
    opened.add([*rows, episode("apple apple apple apple pie"), episode("zebra seen at the zoo")])
    yield opened
    opened.close()


def first(store: object, text: str = "apple zebra") -> str:
    return store.search(query(text, k=3, tau_days=0))[0].episode.user


def test_the_row_holding_the_rare_word_comes_first(store):
    assert first(store) == "zebra seen at the zoo"  # ts_rank alone put the row saying apple four times first


def test_a_word_alone_still_ranks_by_how_often_a_row_holds_it(store):
    assert first(store, "apple") == "apple apple apple apple pie"


def test_common_words_are_known_from_the_statistics_without_counting(store, monkeypatch):
    store.database.execute("ANALYZE thoth_episodes")
    monkeypatch.setattr(postgres_fts, "COUNTED_ROWS", 1)  # a count would call apple as rare as zebra
    assert first(store) == "zebra seen at the zoo"


def test_the_weight_is_bm25s_inverse_document_frequency():
    assert idf(0, 100) == pytest.approx(math.log(1 + 100.5 / 0.5))
    assert idf(100, 100) == pytest.approx(math.log(1 + 0.5 / 100.5))
    assert idf(None, 10) == idf(0, 10) and idf(50, 10) == idf(10, 10)  # no count yet; a stale row estimate
