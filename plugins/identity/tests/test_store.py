from __future__ import annotations

import re
import sqlite3

import pytest
from thoth_identity.store import IdentityStore, query_terms

from thoth_core import ThothError


def make_store(tmp_path):
    return IdentityStore(tmp_path / "identity" / "identity.db")


def test_new_value_supersedes_with_history_kept(tmp_path):
    store = make_store(tmp_path)
    first = store.set_fact("w", "ann", "profession", "nurse", confidence=1.0, source="test", at=100.0)
    second = store.set_fact("w", "ann", "profession", "surgeon", confidence=1.0, source="test", at=200.0)
    assert [f["object"] for f in second["superseded"]] == ["nurse"]
    assert [f["object"] for f in store.current_facts("w", "ann")] == ["surgeon"]
    history = [(f["object"], f["valid_from"], f["valid_to"]) for f in store.fact_history("w", "ann")]
    assert history == [("nurse", 100.0, 200.0), ("surgeon", 200.0, None)]
    assert first["fact"]["id"] != second["fact"]["id"]
    again = store.set_fact("w", "ann", "profession", "Surgeon", confidence=1.0, source="test")
    assert again["unchanged"] and len(store.fact_history("w", "ann")) == 2


def test_multi_valued_facts_accumulate(tmp_path):
    store = make_store(tmp_path)
    store.set_fact("w", "ann", "preference", "tea", confidence=1.0, source="t", multi_valued=True)
    store.set_fact("w", "ann", "preference", "dark mode", confidence=1.0, source="t", multi_valued=True)
    assert sorted(f["object"] for f in store.current_facts("w", "ann")) == ["dark mode", "tea"]


def test_search_ranks_relevant_observations_of_one_peer_only(tmp_path):
    store = make_store(tmp_path)
    for text in ("Ann sails a small boat on weekends", "Ann is allergic to peanuts", "Ann writes Rust at work"):
        store.add_observation("w", "ann", text, kind="explicit", author="deriver", confidence=0.8, source="t")
    store.add_observation(
        "w", "bob", "Bob sails across the Atlantic", kind="explicit", author="deriver", confidence=0.9, source="t"
    )
    store.add_observation(
        "other",
        "ann",
        "Ann of another workspace sails too",
        kind="explicit",
        author="deriver",
        confidence=0.9,
        source="t",
    )
    found = store.search_observations("w", "ann", "any tips for sailing a boat this weekend?", limit=5)
    assert [o["content"] for o in found] == ["Ann sails a small boat on weekends"]
    assert store.search_observations("w", "carol", "sailing boat", limit=5) == []


def test_duplicate_observations_are_skipped(tmp_path):
    store = make_store(tmp_path)
    assert store.add_observation("w", "ann", "likes tea", kind="explicit", author="user", confidence=1, source="t")
    assert (
        store.add_observation("w", "ann", "likes tea", kind="explicit", author="user", confidence=1, source="t") is None
    )


def test_export_import_forget_round_trip(tmp_path):
    store = make_store(tmp_path)
    mid = store.add_message("w", "ann", thread="t1", session_id="s", turn_id="x", role="user", content="I sail", at=5.0)
    store.add_observation(
        "w", "ann", "Ann sails", kind="explicit", author="deriver", confidence=0.9, source="m", message_id=mid
    )
    store.set_fact("w", "ann", "name", "Ann", confidence=1.0, source="t", at=1.0)
    store.set_fact("w", "ann", "name", "Annie", confidence=1.0, source="t", at=2.0)
    exported = store.export_rows("w", "ann")
    receipt = store.delete("w", "ann")
    assert receipt == {"facts": 2, "observations": 1, "messages": 1, "cached_answers": 0}
    assert store.counts("w", "ann") == {"observations": 0, "facts": 0, "fact_history": 0, "messages": 0, "withheld": 0}
    assert store.import_rows("w", "ann", exported) == {"facts": 2, "observations": 1, "messages": 1}
    assert store.import_rows("w", "ann", exported) == {"facts": 0, "observations": 0, "messages": 0}
    again = store.export_rows("w", "ann")
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("id", "message_id")} for r in rows]  # noqa: E731
    for table in ("facts", "observations", "messages"):
        assert strip(again[table]) == strip(exported[table])
    assert again["observations"][0]["message_id"] == again["messages"][0]["id"]


def test_forget_one_thread_takes_what_was_derived_from_it_and_keeps_the_rest(tmp_path):
    store = make_store(tmp_path)
    m1 = store.add_message("w", "ann", thread="t1", session_id="s1", turn_id="turn1", role="user", content="a")
    m2 = store.add_message("w", "ann", thread="t2", session_id="s2", turn_id="turn2", role="user", content="b")
    store.add_observation(
        "w", "ann", "from t1", kind="explicit", author="deriver", confidence=0.5, source="m", message_id=m1
    )
    for turn in ("turn1", "turn2"):
        store.add_observation(
            "w", "ann", f"noted {turn}", kind="noted", author="ann", confidence=0.8, source=f"reaction:{turn}"
        )
    store.set_fact("w", "ann", "name", "Ann", confidence=1.0, source="t")
    store.set_fact("w", "ann", "hobby", "sailing", confidence=0.95, source=f"derived:message:{m1}")
    store.set_fact("w", "ann", "pet", "cat", confidence=0.95, source=f"derived:message:{m2}")
    store.cache_put("w", "ann", "representation", "Ann sails (from t1) and has a cat (from t2).")
    assert store.delete("w", "ann", "t1") == {"facts": 1, "observations": 2, "messages": 1, "cached_answers": 1}
    assert store.cache_get("w", "ann", "representation") is None  # drawn from every thread: fetched again
    assert [f["predicate"] for f in store.current_facts("w", "ann")] == ["name", "pet"]
    assert [o["content"] for o in store.recent_observations("w", "ann", limit=5)] == ["noted turn2"]
    assert store.counts("w", "ann")["messages"] == 1


def test_a_bad_import_names_the_field_and_writes_nothing(tmp_path):
    from thoth_identity.backend import EXPORT_FORMAT, IdentityBackend
    from thoth_identity.settings import IdentitySettings

    store = make_store(tmp_path)
    backend = IdentityBackend(None, IdentitySettings(), store)
    good = {"role": "user", "content": "hi", "at": 1.0}
    cases = [
        ({"messages": [good, {"content": "no role", "at": 2.0}]}, "messages[1].role: missing"),
        ({"observations": ["a string"]}, "observations[0]: expected an object, got 'a string'"),
        (
            {"facts": [{"predicate": "name", "object": "Ann", "valid_from": "yesterday"}]},
            "facts[0].valid_from: expected a number",
        ),
        ({"messages": {"role": "user"}}, "messages: expected a list, got dict"),
    ]
    for rows, message in cases:
        with pytest.raises(ThothError, match=re.escape(message)):
            backend.import_document({"format": EXPORT_FORMAT, **rows}, workspace="w", peer="ann")
    # Even a failure the shape check cannot see (here a row the database refuses) leaves nothing behind.
    with pytest.raises(sqlite3.Error):
        store.import_rows(
            "w", "ann", {"messages": [good], "facts": [{"predicate": "x", "object": "y", "valid_from": [1]}]}
        )
    assert store.counts("w", "ann") == {"observations": 0, "facts": 0, "fact_history": 0, "messages": 0, "withheld": 0}


def test_query_terms_drop_stopwords_and_short_words():
    assert query_terms("What do you know about my boat, the BOAT?") == ["boat"]


def test_relevant_facts_put_the_name_and_matches_first_and_cap_the_rest():
    from thoth_identity.render import relevant_facts

    facts = [{"predicate": "name", "object": "Ann", "valid_from": 1.0}]
    facts += [{"predicate": f"pet_{i}", "object": f"animal {i}", "valid_from": float(i)} for i in range(20)]
    facts += [{"predicate": "sister", "object": "Maria", "valid_from": 0.5}]
    chosen = relevant_facts(facts, "How is Maria doing?", others=3)
    assert [f["predicate"] for f in chosen] == ["name", "sister", "pet_19", "pet_18", "pet_17"]
