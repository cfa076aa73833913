from __future__ import annotations

import pytest
from thoth_identity.facts import ParsedFact, parse_remember


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my name is Ada Lovelace", ParsedFact("name", "Ada Lovelace")),
        ("Call me Ada.", ParsedFact("name", "Ada")),
        ("I work as a data engineer", ParsedFact("profession", "data engineer")),
        ("I'm a nurse by profession", ParsedFact("profession", "nurse")),
        ("I live in Oslo", ParsedFact("location", "Oslo")),
        ("I prefer short answers", ParsedFact("preference", "short answers")),
        ("my sister is Maria", ParsedFact("sister", "Maria")),
        ("My favourite editor is vim", ParsedFact("favourite_editor", "vim")),
        ("timezone: CET", ParsedFact("timezone", "CET")),
        ("Home Town : Bergen", ParsedFact("home_town", "Bergen")),
    ],
)
def test_simple_forms_become_facts(text, expected):
    assert parse_remember(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "I get grumpy before coffee",
        "",
        "remember the milk tomorrow",
        "Here are the steps: 1. build",
        "see the docs: https://example.com/a",
        "docs: www.example.com",
    ],
)
def test_other_text_is_a_note(text):
    assert parse_remember(text) is None


def test_preferences_are_multi_valued_and_names_are_not():
    assert parse_remember("I prefer tea").multi_valued
    assert not parse_remember("my name is Ada").multi_valued
