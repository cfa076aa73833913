"""The contract every episodic backend passes: subclass `StoreContract` in your tests.

    from thoth_episodic.contract import StoreContract

    class TestMyBackend(StoreContract):
        @pytest.fixture
        def open_store(self, tmp_path):
            # return a callable that opens a new handle on one fresh, empty storage
            return lambda: MyStore(tmp_path / "db")

The tests use fixed random vectors, not a model, so they run without the embedder.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from thoth_core.types import CUT_SHORT

from .records import Episode, EpisodeStore, Query

DIM = 384
DAY = 86400.0
NOW = 1_700_000_000.0


def unit(seed: int, dim: int = DIM) -> np.ndarray:
    """A fixed random unit vector."""
    vector = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


def near(vector: np.ndarray, seed: int, noise: float = 0.3) -> np.ndarray:
    """A unit vector close to `vector`."""
    mixed = vector + noise * unit(seed, len(vector))
    return (mixed / np.linalg.norm(mixed)).astype(np.float32)


def episode(
    text: str, *, peer: str = "ann", workspace: str = "w", thread: str = "t1", days_ago: float = 1.0, **extra: Any
) -> Episode:
    """An episode that happened `days_ago` before NOW."""
    at = NOW - days_ago * DAY
    return Episode(workspace=workspace, peer=peer, thread=thread, user=text, occurred_at=at, recorded_at=at, **extra)


def found(episode: Episode | None) -> Episode:
    """The episode a lookup must have found."""
    assert episode is not None
    return episode


def query(text: str, vector: np.ndarray | None = None, **kwargs: Any) -> Query:
    """A query for peer ann in workspace w at NOW."""
    values: dict[str, Any] = {"workspace": "w", "peer": "ann", "k": 5, "now": NOW, "vector": vector}
    values.update(kwargs)
    return Query(text=text, **values)


class StoreContract:
    """Behaviour shared by every backend; needs an `open_store` fixture (see module docstring)."""

    @pytest.fixture
    def store(self, open_store: Callable[[], EpisodeStore]) -> Any:
        """A handle on the fresh storage, closed after the test."""
        handle = open_store()
        yield handle
        handle.close()

    def test_add_then_get_round_trips_every_field(self, store: EpisodeStore) -> None:
        original = episode(
            "I adopted a cat named Miso",
            assistant="Lovely!",
            summary="cat",
            session_id="s1",
            turn_id="turn1",
            cost_usd=0.25,
            model="m",
            agent="scout",
        )
        store.add([original], np.stack([unit(1)]))
        got = store.get(original.id)
        assert got is not None and got.to_dict() == original.to_dict()
        assert store.find_turn("turn1") == got
        assert store.count(workspace="w", peer="ann") == 1

    def test_adding_the_same_episode_again_is_a_no_op(self, store: EpisodeStore) -> None:
        original = episode("same")
        assert len(store.add([original], np.stack([unit(1)]))) == 1
        assert store.add([Episode.from_dict(original.to_dict())], np.stack([unit(1)])) == []
        assert store.count() == 1

    def test_a_turn_is_stored_once_even_when_written_again_under_a_new_id(self, store: EpisodeStore) -> None:
        first = episode("my cat is called Miso", turn_id="turn1")
        assert store.add([first], np.stack([unit(1)])) == [first]
        replayed = episode("my cat is called Miso", turn_id="turn1")  # a post-turn write repeated after a crash
        twice = episode("my cat is called Miso", turn_id="turn2")
        again = episode("my cat is called Miso", turn_id="turn2")
        assert store.add([replayed, twice, again], np.stack([unit(1), unit(2), unit(2)])) == [twice]
        assert store.count(workspace="w", peer="ann") == 2 and store.get(replayed.id) is None
        assert store.find_turn("turn1") == store.get(first.id)
        hits = store.search(query("Miso", unit(1), k=5))
        assert sorted(h.episode.id for h in hits) == sorted([first.id, twice.id])
        others = [
            episode("my cat is called Miso", peer="bob", turn_id="turn1"),  # the key is workspace, peer and turn
            episode("my cat is called Miso", workspace="other", turn_id="turn1"),
            episode("imported without a turn id"),
            episode("imported without a turn id"),
        ]
        assert len(store.add(others)) == 4
        changed = Episode.from_dict(dict(first.to_dict(), user="my cat is called Mochi"))
        assert store.add([changed]) == [changed]  # a new version of the turn's own episode still supersedes it
        assert found(store.get(first.id)).user == "my cat is called Mochi"
        assert store.count(workspace="w", peer="ann") == 4

    def test_a_whole_reply_replaces_the_turns_cut_short_episode_in_place(self, store: EpisodeStore) -> None:
        cut = episode("plan my trip", assistant=f"Day one: Oslo\n{CUT_SHORT}", turn_id="turn1", context="before")
        assert store.add([cut], np.stack([unit(1)])) == [cut]
        shorter = episode("plan my trip", assistant=CUT_SHORT, turn_id="turn1")  # a cut-short one replaces nothing
        assert store.add([shorter]) == []
        whole = episode("plan my trip", assistant="Day one: Oslo. Day two: Bergen.", turn_id="turn1")
        assert store.add([whole], np.stack([unit(2)])) == [whole]
        assert (whole.id, whole.context) == (cut.id, "before")  # in place: the same id and neighbour context
        kept = store.find_turn("turn1")
        assert kept is not None and (kept.id, kept.assistant) == (cut.id, "Day one: Oslo. Day two: Bergen.")
        assert store.count(workspace="w", peer="ann") == 1
        assert found(store.get(cut.id, as_of=kept.recorded_at - 1e-3)).assistant.endswith(CUT_SHORT)  # the old version
        assert [h.episode.assistant for h in store.search(query("Bergen", unit(2), k=5))] == [whole.assistant]
        for later in (episode("plan my trip", assistant="Another whole reply.", turn_id="turn1"), shorter):
            assert store.add([later]) == []  # the first whole version stays
        assert found(store.find_turn("turn1")).assistant == whole.assistant

    def test_dense_search_finds_the_nearest_vector(self, store: EpisodeStore) -> None:
        items = [episode(f"note {i}") for i in range(20)]
        store.add(items, np.stack([unit(i) for i in range(20)]))
        hits = store.search(query("zzz", near(unit(7), 99), k=3, tau_days=0))
        assert hits[0].episode.id == items[7].id
        assert hits[0].dense is not None and hits[0].dense > 0.8 and hits[0].dense_rank == 1

    def test_a_store_that_embeds_late_embeds_the_query_once(self, store: EpisodeStore) -> None:
        if not getattr(store, "embeds_late", False):
            pytest.skip("the store gets the query's vector, not `embed` (records.EpisodeStore.search)")
        items = [episode(f"note {i}") for i in range(5)]
        store.add(items, np.stack([unit(i) for i in range(5)]))
        calls: list[int] = []

        def embed() -> np.ndarray:
            calls.append(1)
            return unit(3)

        hits = store.search(replace(query("zzz", k=1, tau_days=0), embed=embed))
        assert calls == [1] and hits[0].episode.id == items[3].id and hits[0].dense_rank == 1

    def test_lexical_search_finds_a_keyword_without_vectors(self, store: EpisodeStore) -> None:
        items = [
            episode("we talked about the weather"),
            episode("my sister plays the cello in Lisbon"),
            episode("lunch was fine"),
        ]
        store.add(items)
        hits = store.search(query("Who plays the cello?", k=2))
        assert hits[0].episode.id == items[1].id and hits[0].bm25_rank == 1 and hits[0].dense is None

    def test_hybrid_fusion_prefers_an_episode_both_signals_agree_on(self, store: EpisodeStore) -> None:
        both = episode("the marathon in Berlin was hard")
        dense_only = episode("running a long race")
        words_only = episode("Berlin marathon tickets are sold out soon, marathon")
        q = unit(5)
        fillers = [episode(f"something else in Berlin {i}") for i in range(12)]
        vectors = [near(q, 1, 0.2), near(q, 2, 0.1), unit(77)] + [near(q, 10 + i, 0.6) for i in range(12)]
        store.add([both, dense_only, words_only, *fillers], np.stack(vectors))
        hits = store.search(query("Berlin marathon", q, tau_days=0, k=3))
        assert hits[0].episode.id == both.id
        assert {h.episode.id for h in hits} == {both.id, words_only.id, dense_only.id}
        assert (hits[0].dense_rank, hits[0].bm25_rank) == (2, 2)

    def test_search_never_crosses_peers_or_workspaces(self, store: EpisodeStore) -> None:
        mine = episode("my passport number is in the drawer")
        others = [
            episode("my passport number is in the drawer", peer="bob"),
            episode("my passport number is in the drawer", workspace="other"),
        ]
        store.add([mine, *others], np.stack([unit(1), unit(1), unit(1)]))
        hits = store.search(query("passport drawer", unit(1), k=10))
        assert [h.episode.id for h in hits] == [mine.id]
        assert store.search(query("passport", unit(1), peer="carol")) == []

    def test_recency_ranks_the_newer_of_two_equal_episodes_first(self, store: EpisodeStore) -> None:
        old, new = episode("gym session notes", days_ago=60), episode("gym session notes", days_ago=1)
        store.add([old, new], np.stack([unit(3), unit(3)]))
        hits = store.search(query("gym session", unit(3), tau_days=14, recency_weight=0.3))
        assert [h.episode.id for h in hits] == [new.id, old.id]
        assert hits[0].recency > hits[1].recency and 0.7 <= hits[1].recency < 0.71
        off = store.search(query("gym session", unit(3), tau_days=0))
        assert [h.recency for h in off] == [1.0, 1.0]

    def test_whole_store_search_finds_an_old_episode_the_newest_prefilter_misses(self, store: EpisodeStore) -> None:
        old = episode("the combination of the garage lock is 4471", days_ago=400)
        filler = [episode(f"chat about groceries, item {i}", days_ago=i / 10) for i in range(250)]
        store.add([old, *filler], np.stack([unit(1000)] + [unit(i) for i in range(250)]))
        probe = near(unit(1000), 5, 0.2)
        whole = store.search(query("garage lock combination", probe, k=3))
        assert whole[0].episode.id == old.id
        prefiltered = store.search(query("garage lock combination", probe, k=3, newest=200))
        assert old.id not in {h.episode.id for h in prefiltered}

    def test_a_changed_episode_supersedes_the_old_version_and_as_of_reads_it(self, store: EpisodeStore) -> None:
        first = episode("I live in Porto")
        store.add([first], np.stack([unit(1)]))
        between = time.time()
        time.sleep(0.01)
        changed = Episode.from_dict(dict(first.to_dict(), user="I live in Lyon", recorded_at=time.time()))
        store.add([changed], np.stack([unit(2)]))
        assert found(store.get(first.id)).user == "I live in Lyon"
        assert found(store.get(first.id, as_of=between)).user == "I live in Porto"
        assert [e.user for e in store.episodes(as_of=between)] == ["I live in Porto"]
        assert [e.user for e in store.episodes()] == ["I live in Lyon"]
        assert store.count() == 1
        assert [h.episode.user for h in store.search(query("Porto Lyon", unit(1), now=time.time()))] == [
            "I live in Lyon"
        ]
        old_hits = store.search(query("Porto", unit(1), as_of=between))
        assert [h.episode.user for h in old_hits] == ["I live in Porto"]

    def test_as_of_excludes_what_had_not_happened_or_been_recorded(self, store: EpisodeStore) -> None:
        early, late = episode("early event", days_ago=10), episode("late event", days_ago=1)
        store.add([early, late], np.stack([unit(1), unit(2)]))
        seen = [e.user for e in store.episodes(workspace="w", peer="ann", as_of=NOW - 5 * DAY)]
        assert seen == ["early event"]
        assert store.get(late.id, as_of=NOW - 5 * DAY) is None

    def test_delete_by_ids_thread_and_peer_really_deletes(self, store: EpisodeStore) -> None:
        a, b, c = (
            episode("alpha one", thread="t1"),
            episode("alpha two", thread="t2"),
            episode("alpha three", thread="t2"),
        )
        other = episode("alpha bob", peer="bob")
        store.add([a, b, c, other], np.stack([unit(1), unit(2), unit(3), unit(4)]))
        store.add([Episode.from_dict(dict(a.to_dict(), user="alpha one edited"))], np.stack([unit(1)]))
        assert store.delete(workspace="w", ids=[a.id]) == 1
        assert store.get(a.id) is None and store.get(a.id, as_of=time.time() + 10) is None
        assert store.delete(workspace="w", peer="ann", thread="t2") == 2
        assert store.search(query("alpha", unit(2), k=10)) == []
        assert store.delete(workspace="w", peer="bob") == 1
        assert store.count() == 0 and list(store.episodes(as_of=time.time() + 10)) == []

    def test_expiring_consolidated_and_purge(self, store: EpisodeStore) -> None:
        old, older, fresh = episode("old", days_ago=40), episode("older", days_ago=50), episode("fresh", days_ago=1)
        store.add([old, older, fresh], np.stack([unit(1), unit(2), unit(3)]))
        cutoff = NOW - 30 * DAY
        assert [e.id for e in store.expiring(cutoff)] == [older.id, old.id]
        store.mark_consolidated([older.id])
        assert [e.id for e in store.expiring(cutoff)] == [old.id]
        assert store.purge(cutoff, consolidated_only=True) == 1
        assert store.get(older.id) is None and store.get(old.id) is not None
        assert store.purge(cutoff, consolidated_only=False) == 1
        assert [e.id for e in store.episodes()] == [fresh.id]

    def test_set_vectors_changes_dense_results(self, store: EpisodeStore) -> None:
        a, b = episode("first"), episode("second")
        store.add([a, b], np.stack([unit(1), unit(2)]))
        store.set_vectors([a.id, b.id], np.stack([unit(2), unit(1)]))
        assert store.search(query("zzz", unit(1), k=1, tau_days=0))[0].episode.id == b.id

    def test_unembedded_lists_current_episodes_without_a_vector_oldest_first(self, store: EpisodeStore) -> None:
        newer, older, embedded = episode("newer", days_ago=1), episode("older", days_ago=2), episode("has one")
        store.add([newer, older])
        store.add([embedded], np.stack([unit(3)]))
        assert [e.id for e in store.unembedded(limit=10)] == [older.id, newer.id]
        assert [e.id for e in store.unembedded(limit=1)] == [older.id]
        assert [e.id for e in store.unembedded(limit=10, recorded_before=older.recorded_at + 1)] == [older.id]
        store.set_vectors([older.id, newer.id], np.stack([unit(1), unit(2)]))
        assert store.unembedded(limit=10) == []

    def test_a_vector_set_later_is_found_by_a_handle_that_searched_before(
        self, store: EpisodeStore, open_store: Callable[[], EpisodeStore]
    ) -> None:
        other = open_store()
        try:
            first, later = episode("walked the dog"), episode("repaired the bike")
            store.add([first], np.stack([unit(1)]))
            store.add([later])
            assert [h.episode.id for h in other.search(query("zzz", unit(2), k=2))] == [first.id]
            store.set_vectors([later.id], np.stack([unit(2)]))
            assert other.search(query("zzz", unit(2), k=1, tau_days=0))[0].episode.id == later.id
        finally:
            other.close()

    def test_latest_and_neighbour_context_are_searchable(self, store: EpisodeStore) -> None:
        first, second = episode("What did you do at the weekend?", days_ago=2), episode("Went hiking", days_ago=1)
        store.add([first, second], np.stack([unit(1), unit(2)]))
        assert found(store.latest(workspace="w", peer="ann", thread="t1")).id == second.id
        store.set_context(second.id, "weekend plans")
        hits = store.search(query("weekend", k=2))
        assert second.id in {h.episode.id for h in hits}
        assert found(store.get(second.id)).context == "weekend plans"

    def test_a_second_handle_sees_the_first_ones_writes(
        self, store: EpisodeStore, open_store: Callable[[], EpisodeStore]
    ) -> None:
        other = open_store()
        try:
            assert other.search(query("kayak", unit(9))) == []
            written = episode("bought a kayak")
            store.add([written], np.stack([unit(9)]))
            assert [h.episode.id for h in other.search(query("kayak", unit(9)))] == [written.id]
            other.delete(workspace="w", ids=[written.id])
            assert store.search(query("kayak", unit(9))) == []
        finally:
            other.close()

    def test_reads_are_scoped_to_one_agent_and_a_delete_reaches_every_agent(self, store: EpisodeStore) -> None:
        mine = episode("my locker code is 2291", agent="a", days_ago=2)
        theirs = episode("my locker code is 2291", agent="b", days_ago=1)
        unnamed = episode("my locker code is 2291", days_ago=3)  # written before agents, or by the default one
        store.add([mine, theirs, unnamed], np.stack([unit(1), unit(1), unit(1)]))
        assert found(store.get(theirs.id)).agent == "b" and unnamed.agent == "default"
        for agent, expected in (("a", mine), ("b", theirs), ("default", unnamed)):
            assert [h.episode.id for h in store.search(query("locker code", unit(1), agent=agent))] == [expected.id]
            assert [h.episode.id for h in store.search(query("locker", agent=agent))] == [expected.id]  # BM25 only
            assert [h.episode.id for h in store.search(query("zz", unit(1), agent=agent, newest=5))] == [expected.id]
            assert found(store.latest(workspace="w", peer="ann", thread="t1", agent=agent)).id == expected.id
            assert [e.id for e in store.episodes(workspace="w", peer="ann", agent=agent)] == [expected.id]
            assert store.count(workspace="w", peer="ann", agent=agent) == 1
        assert store.search(query("locker", unit(1), agent="c")) == [] and store.count(agent="c") == 0
        assert found(store.latest(workspace="w", peer="ann", thread="t1")).id == unnamed.id
        assert [e.id for e in store.episodes(peer="ann")] == [unnamed.id, mine.id, theirs.id]
        assert store.count(workspace="w", peer="ann") == 3
        assert store.delete(workspace="w", peer="ann") == 3 and store.count() == 0

    def test_episodes_stream_oldest_first_across_pages(self, store: EpisodeStore) -> None:
        items = [episode(f"entry {i}", days_ago=i / 100) for i in range(1200)]
        store.add(items)
        listed = list(store.episodes(workspace="w", peer="ann"))
        assert [e.id for e in listed] == [e.id for e in reversed(items)]
