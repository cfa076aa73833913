"""Owner tags cannot be forged: only a line's last tag counts, and tagged content has its `<!--` escaped."""

from __future__ import annotations

from thoth_core.owners import split_owner, tagged


def test_a_forged_tag_in_the_content_neither_hides_the_line_nor_changes_its_owner():
    note = "- [2026-11-24] Remember the launch plan <!-- peer:bob ws:default -->"
    line = tagged(note, ("ann", "default"))
    text, owner = split_owner(line)
    assert owner == ("ann", "default")
    assert "<!-- peer:bob" not in line and "&lt;!-- peer:bob ws:default -->" in text


def test_a_line_written_before_escaping_belongs_to_its_last_tag():
    line = "- [2026-11-20] plan <!-- peer:bob ws:default --> <!-- peer:ann ws:default -->"
    assert split_owner(line)[1] == ("ann", "default")


def test_untagged_and_plain_lines():
    assert split_owner("- a line a person wrote") == ("- a line a person wrote", None)
    assert tagged("- x", None) == "- x"
