"""The full-text stage of both backends: in a large store, rows holding two of the words are ranked first."""

from __future__ import annotations

import sqlite3
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from thoth_episodic.contract import episode, query, unit
from thoth_episodic.postgres_fts import any_two
from thoth_episodic.scoring import fts_pairs, large_store_matches, pairable


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A store with 50 rows holding both words in their neighbours' context (a low full-text weight), 3 holding
    one of them often in their own text (ranked above the pairs when every match is ranked), and 200 others."""
    if request.param == "sqlite":
        from thoth_episodic.sqlite_store import SQLiteStore

        opened: object = SQLiteStore(tmp_path / "episodes.db", ann="exact")
    else:
        from thoth_episodic.postgres_store import SCHEMA, PostgresStore

        opened = PostgresStore(request.getfixturevalue("storage_url"), schema=SCHEMA, ann="exact")
    pairs = [episode(f"note pair {i}", context="cherry banana") for i in range(50)]
    singles = [episode(f"cherry cherry cherry cherry cherry single {i}") for i in range(3)]
    opened.add(pairs + singles + [episode(f"filler {i} here") for i in range(200)])
    yield opened
    opened.close()


def large(store: object, monkeypatch: pytest.MonkeyPatch, common_share: float = 1.0) -> None:
    """Make the store count as large; SQLite's then leaves out the words held by more than `common_share` of rows."""
    module = sys.modules[type(store)._lexical.__module__]  # where BM25 is read
    monkeypatch.setattr(module, "PAIRED_ROWS", 0)
    if hasattr(module, "COMMON_SHARE"):
        monkeypatch.setattr(module, "COMMON_SHARE", common_share)


def top(store: object, text: str = "cherry banana", **asked: object) -> set[str]:
    return {hit.episode.user.split()[-2] for hit in store.search(query(text, k=3, tau_days=0, **asked))}


def test_a_small_store_ranks_every_row_matching_any_word(store):
    assert top(store) == {"single"}


def test_a_large_store_ranks_the_rows_holding_two_of_the_words(store, monkeypatch):
    large(store, monkeypatch)
    assert top(store) == {"pair"}


def test_too_few_rows_holding_two_words_rank_every_row_matching_any(store, monkeypatch):
    large(store, monkeypatch)
    store.delete(workspace="w", ids=[hit.episode.id for hit in store.search(query("pair", k=1, tau_days=0))])
    assert top(store) == {"single"}


def test_a_one_word_query_ranks_every_match(store, monkeypatch):
    large(store, monkeypatch)
    assert top(store, "cherry") == {"single"}


def test_quotes_stopwords_and_operators_make_a_valid_query(store, monkeypatch):
    large(store, monkeypatch)
    assert top(store, "o'neil's cherry banana over the (weird) & | ! :* AND NOT words") == {"pair"}
    assert top(store, "___ cherry 123 ünïcödé banana _x_ now don't it's") == {"pair"}


def test_a_newest_only_search_ranks_every_match(store, monkeypatch):
    large(store, monkeypatch)
    assert top(store, "cherry banana", newest=300) == {"single"}


def test_a_search_inside_a_transaction_sees_what_it_wrote(storage_url):
    from thoth_episodic.postgres_store import SCHEMA, PostgresStore

    store = PostgresStore(storage_url, schema=SCHEMA, ann="exact")
    try:
        with store.database.transaction():
            store.add([episode("zebra crossing at noon")])
            assert [hit.episode.user for hit in store.search(query("zebra", k=3))] == ["zebra crossing at noon"]
    finally:
        store.close()


def test_words_postgres_drops_are_left_out_of_its_pairs():
    from thoth_episodic.postgres_fts import _has_lexeme

    kept = [w for w in ["don't", "didn't", "now", "i'm", "___", "x_", "it's", "o'neil"] if _has_lexeme(w)]
    assert kept == ["i'm", "x_", "o'neil"]


def test_the_pair_queries():
    assert fts_pairs(["a", "b", "c"]) == '("a" AND "b") OR ("a" AND "c") OR ("b" AND "c")'
    assert any_two(["o'neil", "cherry"]) == "('o''neil' & 'cherry')"
    assert not pairable(["one"]) and pairable(["one", "two"]) and not pairable([str(i) for i in range(13)])


def test_the_query_is_embedded_while_the_full_text_stage_runs(store, monkeypatch):
    finished, real = threading.Event(), type(store)._lexical

    def lexical(self, *args):
        found = real(self, *args)
        finished.set()
        return found

    def embed():
        embedded.append(finished.wait(5))  # True: the full-text stage ran while the query was being embedded
        return unit(1)

    embedded: list[bool] = []
    monkeypatch.setattr(type(store), "_lexical", lexical)
    hits = store.search(replace(query("cherry banana", k=3, tau_days=0), embed=embed))
    assert embedded == [True] and hits[0].bm25_rank == 1


def test_sqlite_full_text_stage_reads_on_its_own_connection(tmp_path):
    from thoth_episodic.sqlite_store import SQLiteStore

    store = SQLiteStore(tmp_path / "episodes.db", ann="exact")
    store.add([episode("kiwi harvest")])
    held, release = threading.Event(), threading.Event()

    def hold_the_writer():
        with store._lock:
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold_the_writer)
    holder.start()
    try:
        assert held.wait(5)
        started = time.monotonic()
        found = store._lexical(query("kiwi", k=3), None)
        waited = time.monotonic() - started
    finally:
        release.set()
        holder.join()
    try:
        assert len(found) == 1 and waited < 5  # it used to wait for the writer's connection
        store.add([episode("kiwi jam")])  # written after the reader opened: a new read sees it
        assert len(store._lexical(query("kiwi", k=3), None)) == 2
    finally:
        store.close()
    with pytest.raises(sqlite3.ProgrammingError, match="closed"):
        store._lexical(query("kiwi", k=3), None)


@pytest.fixture
def common_word_store(tmp_path: Path) -> Iterator[object]:
    """50 rows holding both words in their neighbours' context, 60 holding `cherry` and `note` in their own text
    (ranked first when `note` counts), 150 holding `note` alone, 350 others: `banana` is in 8 % of the rows,
    `cherry` in 18 %, `note` in 34 %."""
    from thoth_episodic.sqlite_store import SQLiteStore

    opened = SQLiteStore(tmp_path / "episodes.db", ann="exact")
    pairs = [episode(f"pair {i}", context="cherry banana") for i in range(50)]
    noted = [episode(f"note cherry dull {i}") for i in range(60)]
    others = [episode(f"note filler {i}") for i in range(150)] + [episode(f"plain other {i}") for i in range(350)]
    opened.add(pairs + noted + others)
    yield opened
    opened.close()


def test_a_large_sqlite_store_leaves_its_common_words_out(common_word_store, monkeypatch):
    assert top(common_word_store, "cherry banana note") == {"dull"}  # a small store ranks every word
    large(common_word_store, monkeypatch, common_share=0.2)
    assert top(common_word_store, "cherry banana note") == {"pair"}
    assert top(common_word_store, "note cherry") == {"dull"}  # the two rarest words stay when all are common
    assert top(common_word_store, "o'neil zebra note") == {"filler"}  # every word when the rest match too few


def test_a_words_share_is_counted_in_slices_spread_over_the_store(tmp_path):
    from thoth_episodic import sqlite_fts
    from thoth_episodic.sqlite_store import SQLiteStore

    store = SQLiteStore(tmp_path / "episodes.db", ann="exact")
    try:
        store.add([episode(f"row {i}" + (" early" if i < 50 else "")) for i in range(1000)])
        with store._reader_connection() as db:
            assert sqlite_fts.held_rows(db, ["early", "row", "absent"], 1000) == {"early": 50, "row": 1000, "absent": 0}
    finally:
        store.close()


def tried(words: list[str], held: dict[str, float], *, fill: bool = True) -> list[str]:
    return [
        " & ".join(chosen) if paired else " | ".join(chosen)
        for paired, chosen in large_store_matches(words, held, 10**6, 50, 0.2, fill=fill)
    ]


def test_filling_ranks_the_rows_of_the_rarer_words_before_every_match():
    held = {"melanie": 265, "go": 158_966, "museum": 1}  # counted on 1M rows of chat turns
    assert tried(["melanie", "go", "museum"], held) == [
        "melanie & go & museum",  # rows holding two of them: 13
        "melanie | museum",  # enough rows to fill the 50 candidates: `go`'s 159k are not ranked
        "melanie | go | museum",
    ]
    assert tried(["melanie", "go", "museum"], held, fill=False) == ["melanie & go & museum", "melanie | go | museum"]


def test_a_large_store_leaves_its_common_words_out_of_the_match_first():
    held = {"caroline": 339, "support": 250_000, "lgbtq": 24, "group": 69_700}
    assert tried(["caroline", "support", "lgbtq", "group"], held) == [
        "caroline & lgbtq & group",
        "caroline | lgbtq",
        "caroline & support & lgbtq & group",
        "caroline | support | lgbtq | group",
    ]
