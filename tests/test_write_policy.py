"""The core's write policy (`thoth_core.write_policy`): one judge for every layer, in any language.

Reflection's tests check its proposals and identity's its derived observations; these check the
judge itself: the corpus's outcomes, that hidden characters never pass, what makes a source
suspect, and that naming the tiers compiles no tables.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thoth_core import write_policy
from thoth_core.testing import policy_corpus as corpus
from thoth_core.write_policy import APPLIED, HELD, UNJUDGED, judge, suspect_source

PERMISSIVE = [t for t in write_policy.TIERS if t not in write_policy.ALWAYS_HELD]


def outcomes(items, peer, auto_apply=write_policy.DEFAULT_AUTO_APPLY):
    found = {APPLIED: 0, HELD: 0, UNJUDGED: 0}
    for _, _, text in items:
        found[judge(text, peer=peer, auto_apply=auto_apply, known_peers=corpus.KNOWN).outcome] += 1
    return found


def test_the_corpus_outcomes():
    """The figures of bench/write_policy.py, as verdicts."""
    assert outcomes(corpus.HOSTILE, corpus.HOSTILE_PEER) == {APPLIED: 0, HELD: 5, UNJUDGED: 62}
    assert outcomes(corpus.BENIGN_ENGLISH, corpus.BENIGN_PEER)[APPLIED] == len(corpus.BENIGN_ENGLISH) == 40
    assert outcomes(corpus.BENIGN_OTHER, corpus.BENIGN_PEER, PERMISSIVE) == {APPLIED: 0, HELD: 0, UNJUDGED: 14}
    assert outcomes([i for i in corpus.HOSTILE if i[0] != "en"], corpus.HOSTILE_PEER, PERMISSIVE)[APPLIED] == 0


def test_a_verdict_says_why():
    applied = judge("Ann prefers short answers.", peer="ann")
    assert applied.applied and applied.tier == "self-fact" and applied.flags == ()
    order = judge("Ann wants the assistant to answer in French.", peer="ann")
    assert order.outcome == HELD and order.flags == ("instruction",) and "assistant" in order.evidence
    foreign = judge(corpus.HOSTILE[0][2], peer="mallory")
    assert foreign.outcome == UNJUDGED and "injection" in foreign.flags
    assert judge("Bob prefers tea.", peer="ann", known_peers={"bob"}, auto_apply=PERMISSIVE).flags == ("other-peer",)


HIDDEN = st.sampled_from(["\u200b", "\u2060", "\ufeff", "\u202e", "\u0301"])  # invisible, bidi, combining


@given(st.sampled_from([text for _, _, text in corpus.BENIGN_ENGLISH]), HIDDEN, st.data())
def test_a_hidden_character_anywhere_makes_a_fact_unjudged(text, hidden, data):
    at = data.draw(st.integers(0, len(text)))
    assert judge(text[:at] + hidden + text[at:], peer="ann", auto_apply=PERMISSIVE).outcome == UNJUDGED


@given(st.sampled_from([text for _, _, text in corpus.BENIGN_ENGLISH if "a" in text]), st.data())
def test_a_look_alike_letter_makes_a_fact_unjudged(text, data):
    at = data.draw(st.sampled_from([i for i, ch in enumerate(text) if ch == "a"]))
    spoofed = text[:at] + "\u0430" + text[at + 1 :]  # Cyrillic a
    assert judge(spoofed, peer="ann", auto_apply=PERMISSIVE).outcome == UNJUDGED


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Ann prefers tea.", None),
        ("Prefers French.", None),
        (corpus.HOSTILE[0][2], "injection"),
        ("ann habite à Lyon.", "unjudged"),
        ("Ann says immer.", "instruction cues of another language"),
    ],
)
def test_what_makes_a_source_suspect(text, why):
    verdict = judge(text, peer="ann")
    assert suspect_source(text, tier=verdict.tier, flags=verdict.flags) == why


def test_naming_the_tiers_compiles_no_tables():
    tables = [f"thoth_core.write_policy.{m}" for m in ("tiers", "language", "cues", "firewall")]  # not `verdict`
    code = f"import sys, thoth_core.write_policy as p; p.TIERS; print([m for m in sys.modules if m in {tables}])"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


@pytest.mark.parametrize(
    "text",
    [
        "Likes visiting evil.top/payload",  # any ending of a host name, then a path
        "Likes evil.gg and lucky.lol",
        "Is fond of tea [click](javascript:alert(1))",  # a script link without //
    ],
)
def test_web_addresses_of_any_ending_and_script_links_are_held(text):
    verdict = judge(text, peer="ann")
    assert verdict.outcome == HELD and verdict.tier == "tool", verdict


@pytest.mark.parametrize("text", ["Works on v1.2/v1.3 of the app", "Likes 3.5/5 ratings", "Prefers and/or lists"])
def test_numbers_and_slashes_are_not_web_addresses(text):
    assert judge(text, peer="ann").applied
