"""Post-fusion signals: neighbouring turns, time and dates, names, speakers; their settings and defaults."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from thoth_episodic import plugin
from thoth_episodic.memory import Settings, memory_for
from thoth_episodic.records import Episode, Query
from thoth_episodic.scoring import FUSIONS, rank
from thoth_episodic.signals import Signals, adjust, asks_when, mentions_time, query_dates, query_names, speaker

from thoth_core import ConfigError

MAY_7 = datetime(2023, 5, 7, 14, 0, tzinfo=UTC).timestamp()
NOW = MAY_7 + 30 * 86400
DAYS = 20 * 86400


def conversation(turns: dict[str, tuple[str, float]], thread: str = "t") -> dict[str, Episode]:
    """Hand-made episodes keyed by name: text and when it happened."""
    return {k: Episode("w", "p", thread, user=text, occurred_at=at) for k, (text, at) in turns.items()}


def order(query: str, scores: list[tuple[str, float]], episodes: dict[str, Episode], signals: Signals | None):
    """Names best first after fusion (BM25 alone here, recency off) and the signals."""
    lexical = [(k, s, episodes[k].occurred_at) for k, s in scores]
    q = Query(query, "w", "p", k=len(scores), now=NOW, tau_days=0, signals=signals)
    hits = rank(q, [], lexical, lambda keys: {k: episodes[k] for k in keys}, FUSIONS["score"])
    return [next(k for k, e in episodes.items() if e is h.episode) for h in hits]


# The question's words are in the turn that asked it; the answer is the next turn, which shares none.
MUSEUM = conversation(
    {
        "asked": ("Did you take the kids to the dinosaur museum?", MAY_7),
        "answer": ("Yes! They loved the bones, we stayed all afternoon.", MAY_7 + 60),
        "other": ("I read a book about kids and dinosaurs.", MAY_7 - 20 * 86400),
        "filler": ("The kids are at school.", MAY_7 - 10 * 86400),
    }
)
MUSEUM_SCORES = [("asked", 9.0), ("other", 5.0), ("filler", 4.4), ("answer", 4.0)]


def test_a_strong_hit_lifts_the_adjacent_answer_turn_of_its_thread():
    query = "Did the kids enjoy the dinosaur museum?"
    assert order(query, MUSEUM_SCORES, MUSEUM, None)[:2] == ["asked", "other"]
    assert order(query, MUSEUM_SCORES, MUSEUM, Signals(neighbour_weight=0.3))[:2] == ["asked", "answer"]


def test_neighbours_are_only_turns_of_the_same_thread_within_the_window():
    far = dict(MUSEUM, answer=Episode("w", "p", "t", user=MUSEUM["answer"].user, occurred_at=MAY_7 + 3600))
    other_thread = dict(MUSEUM, answer=Episode("w", "p", "u", user=MUSEUM["answer"].user, occurred_at=MAY_7 + 60))
    signals = Signals(neighbour_weight=0.3, neighbour_seconds=600)
    for episodes in (far, other_thread):
        assert order("the dinosaur museum", MUSEUM_SCORES, episodes, signals)[1] == "other"


def test_a_date_question_prefers_the_episode_from_that_date():
    episodes = conversation(
        {"may7": ("Baked bread.", MAY_7), "may9": ("Baked bread.", MAY_7 + 2 * 86400), "x": ("Bread.", MAY_7 - DAYS)}
    )
    scores = [("may9", 3.0), ("may7", 2.9), ("x", 1.0)]
    assert order("What did I bake on 7 May 2023?", scores, episodes, None)[0] == "may9"
    assert order("What did I bake on 7 May 2023?", scores, episodes, Signals(temporal_weight=0.25))[0] == "may7"
    assert order("What did I bake?", scores, episodes, Signals(temporal_weight=0.25))[0] == "may9"  # no date asked


def test_a_when_question_prefers_a_turn_that_says_when():
    episodes = conversation(
        {"plain": ("I went to the support group.", MAY_7), "dated": ("Went yesterday!", MAY_7), "x": ("Hi", 0.0)}
    )
    scores = [("plain", 3.0), ("dated", 2.5), ("x", 1.0)]
    assert order("When did she go to the support group?", scores, episodes, Signals(temporal_weight=0.5))[0] == "dated"
    assert order("Why did she go to the support group?", scores, episodes, Signals(temporal_weight=0.5))[0] == "plain"


def test_a_name_the_question_asks_about_prefers_turns_that_name_it():
    episodes = conversation(
        {"mel": ("Melanie: I paint at night.", MAY_7), "car": ("Caroline: I paint often.", MAY_7), "x": ("Hi", 0.0)}
    )
    scores = [("car", 3.0), ("mel", 2.8), ("x", 1.0)]
    assert order("What does Melanie paint?", scores, episodes, None)[0] == "car"
    assert order("What does Melanie paint?", scores, episodes, Signals(entity_weight=0.3))[0] == "mel"


def test_a_question_about_someone_prefers_what_they_said_to_turns_addressing_them():
    episodes = conversation(
        {
            "thanks": ("Caroline: Thanks, Melanie! Your painting of the lake is lovely.", MAY_7),
            "said": ("Melanie: I painted a horse last week.", MAY_7 + 60),
            "x": ("Hi", 0.0),
        }
    )
    scores = [("thanks", 3.0), ("said", 2.5), ("x", 1.0)]
    question = "What has Melanie painted?"
    assert order(question, scores, episodes, Signals(entity_weight=0.3))[0] == "thanks"  # both name her
    assert order(question, scores, episodes, Signals(speaker_weight=0.75))[0] == "said"
    assert order("What has Caroline painted?", scores, episodes, Signals(speaker_weight=0.75))[0] == "thanks"
    assert order("What has been painted?", scores, episodes, Signals(speaker_weight=0.75))[0] == "thanks"  # no name


def test_a_speaker_turn_gets_the_speaker_weight_instead_of_the_names_weight():
    episodes = conversation({"said": ("Melanie: I paint.", MAY_7), "named": ("Melanie paints, says Jon.", MAY_7)})
    both = Signals(entity_weight=0.5, speaker_weight=0.25)
    adjusted = adjust({"said": 1.0, "named": 1.0}, episodes, "What does Melanie paint?", both)
    assert adjusted == {"said": 1.25, "named": 1.5}


def test_speaker_reads_a_transcript_label():
    assert speaker("Melanie: I went camping") == "Melanie" and speaker("  Jo: hi") == "Jo"
    assert speaker("Note: buy milk") == "Note"  # a label, whoever it names: only a name the query asks about counts
    assert speaker("I said: yes") is None and speaker("10:30 meeting") is None and speaker("") is None


def test_zero_weights_keep_the_fused_scores():
    scores = {k: s for k, s in MUSEUM_SCORES}
    assert adjust(scores, MUSEUM, "When did Melanie visit the museum?", Signals()) == scores
    assert not Signals().active and Signals(entity_weight=0.1).active and Signals(speaker_weight=0.1).active


def test_query_parsing():
    assert asks_when("When did Caroline go?") and asks_when("How long ago was it?") and asks_when("on 7 May 2023")
    assert not asks_when("What does Melanie paint?")
    assert mentions_time("last Friday") and mentions_time("in 2022") and not mentions_time("I like tea")
    assert query_dates("7 May 2023, May 8th, 2023 or 2023-05-09 but not 31 February 2023") == {
        date(2023, 5, 7),
        date(2023, 5, 8),
        date(2023, 5, 9),
    }
    assert query_names("What did Melanie's kids and Caroline make?") == {"Melanie", "Caroline"}
    assert query_names("Paris is where Jon lives?") == {"Jon"}  # a first word is capitalised anyway


def test_defaults_reach_every_recall_and_each_weight_is_configurable(make_runtime):
    defaults = Settings()
    assert defaults.signals == Signals(0.3, 600.0, 2.0, 0.0, 0.75)
    assert {"entity_weight", "speaker_weight"} <= set(plugin.CONFIG_DEFAULTS["plugins.episodic"])
    config = {"plugins": {"episodic": {"neighbour_weight": 0, "temporal_weight": 1.5, "neighbour_seconds": 120}}}
    config["plugins"]["episodic"]["speaker_weight"] = 0.5
    memory = memory_for(make_runtime({"episodic": plugin}, config=config))
    seen: list[Query] = []
    store = memory.store
    real = store.search
    store.search = lambda query: seen.append(query) or real(query)  # type: ignore[method-assign]
    memory.recall("when?", workspace="w", peer="p", k=3)
    assert seen[0].signals == Signals(0.0, 120.0, 1.5, defaults.entity_weight, 0.5)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("neighbour_weight", -1, "neighbour_weight"),
        ("temporal_weight", "lots", "temporal_weight"),
        ("speaker_weight", 11, "speaker_weight"),
    ],
)
def test_a_bad_weight_is_refused_naming_its_key(make_runtime, key, value, message):
    with pytest.raises(ConfigError, match=rf"plugins\.episodic\.{message}"):
        make_runtime({"episodic": plugin}, config={"plugins": {"episodic": {key: value}}})
