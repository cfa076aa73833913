"""Marked sections of home files (`thoth_core.sections`): the file alone without a shared store; with one, what any
host writes into a section every host reads, while the rest of each host's file stays its own."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from thoth_core.config import Config
from thoth_core.database import POOL_WAIT_SECONDS, StoreDown
from thoth_core.sections import HomeSections, marked, sections_of, with_sections
from thoth_core.testing.postgres import outage

MEMORY = "# Memory\n\nMine.\n\n## Recent notes\n\n<!-- thoth:notes -->\n- a\n<!-- /thoth:notes -->\n"

names = st.sampled_from(["notes", "snapshot", "learned"])
bodies = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<>\r"), max_size=40).map(str.strip)


@given(st.dictionaries(names, bodies, max_size=3), st.text(st.sampled_from("ab #\n"), max_size=30))
def test_sections_written_are_the_sections_read(bodies_by_name: dict[str, str], prose: str) -> None:
    text = with_sections(prose, bodies_by_name)
    assert sections_of(text) == bodies_by_name
    assert with_sections(text, bodies_by_name) == text  # in place once there
    assert text.startswith(prose.rstrip("\n"))  # the rest of the file is kept


def test_a_section_is_replaced_in_place_and_a_missing_one_added_at_the_end() -> None:
    text = with_sections(MEMORY, {"notes": "- b", "snapshot": "- s"})
    assert text.startswith("# Memory\n\nMine.\n\n## Recent notes\n\n" + marked("notes", "- b") + "\n")
    assert text.endswith(marked("snapshot", "- s") + "\n")


def sections(root: Path, storage: dict[str, Any]) -> HomeSections:
    return HomeSections(Config(data=storage, path=root / "thoth.toml"))


def test_without_a_shared_store_the_file_is_all_there_is(tmp_path: Path) -> None:
    home = sections(tmp_path, {})
    path = tmp_path / "persona" / "MEMORY.md"
    assert not home.shared and home.read(path) == ""
    home.write(path, MEMORY)
    assert path.read_text() == MEMORY == home.read(path)
    path.write_text(MEMORY.replace("- a", "- by hand"))
    assert "- by hand" in home.read(path)


def test_hosts_share_the_sections_and_keep_the_rest_of_their_files(tmp_path: Path, storage_url: str) -> None:
    storage = {"storage": {"url": storage_url}}
    a, b = sections(tmp_path / "a", storage), sections(tmp_path / "b", storage)
    path_a, path_b = tmp_path / "a" / "persona" / "MEMORY.md", tmp_path / "b" / "persona" / "MEMORY.md"
    try:
        path_b.parent.mkdir(parents=True)
        path_b.write_text("# Memory of host b\n")
        assert a.shared and b.read(path_b) == "# Memory of host b\n"
        a.write(path_a, with_sections(MEMORY, {"notes": "- written on a", "snapshot": "- kept"}))
        seen = b.read(path_b)
        assert seen.startswith("# Memory of host b\n")  # b's own text stays b's
        assert sections_of(seen) == {"notes": "- written on a", "snapshot": "- kept"}
        assert seen.index("thoth:notes") < seen.index("thoth:snapshot")  # in the writer's order
        assert path_b.read_text() == "# Memory of host b\n"  # reading writes nothing
        b.write(path_b, with_sections(seen, {"notes": "- written on b"}))
        assert sections_of(a.read(path_a))["notes"] == "- written on b"
        assert "Mine." in a.read(path_a) and "Mine." not in b.read(path_b)
    finally:
        a.close()
        b.close()


def test_notes_hosts_kept_before_the_home_was_shared_are_merged_once_none_hidden(
    tmp_path: Path, storage_url: str
) -> None:
    storage = {"storage": {"url": storage_url}}
    a, b = (HomeSections(Config(data=storage, path=tmp_path / h / "thoth.toml"), tmp_path / h / ".thoth") for h in "ab")
    path_a, path_b = tmp_path / "a" / "MEMORY.md", tmp_path / "b" / "MEMORY.md"
    path_a.parent.mkdir()
    path_b.parent.mkdir()
    path_a.write_text(with_sections("# a\n", {"notes": "- shared line\n- only a"}))
    path_b.write_text(with_sections("# b\n", {"notes": "- only b\n- shared line", "snapshot": "- b's snapshot"}))
    try:
        assert sections_of(a.read(path_a)) == {"notes": "- shared line\n- only a"}
        both = {"notes": "- shared line\n- only a\n- only b", "snapshot": "- b's snapshot"}
        assert sections_of(b.read(path_b)) == both  # b's own lines added after the store's, each once
        assert sections_of(a.read(path_a)) == both
        b.write(path_b, with_sections(b.read(path_b), {"notes": "- shared line"}))  # e.g. a nightly folded them
        assert sections_of(a.read(path_a))["notes"] == "- shared line"  # a merged once: its file is not merged again
        again = HomeSections(Config(data=storage, path=tmp_path / "a" / "thoth.toml"), tmp_path / "a" / ".thoth")
        assert sections_of(again.read(path_a))["notes"] == "- shared line"  # nor by its next process
        again.close()
    finally:
        a.close()
        b.close()


def test_the_lock_keeps_out_the_other_hosts_writers(tmp_path: Path, storage_url: str) -> None:
    storage = {"storage": {"url": storage_url}}
    a, b = sections(tmp_path / "a", storage), sections(tmp_path / "b", storage)
    path_a, path_b = tmp_path / "a" / "MEMORY.md", tmp_path / "b" / "MEMORY.md"
    order: list[str] = []

    def other_host() -> None:
        with b.lock(path_b):
            order.append("b")

    try:
        with a.lock(path_a):
            waiting = threading.Thread(target=other_host)
            waiting.start()
            time.sleep(0.3)
            order.append("a")
        waiting.join(10)
        assert order == ["a", "b"]
    finally:
        a.close()
        b.close()


def test_a_store_that_does_not_answer_fails_at_once(tmp_path: Path, storage_url: str, pg_server: Any) -> None:
    home = sections(tmp_path, {"storage": {"url": storage_url}})
    path = tmp_path / "MEMORY.md"
    try:
        home.write(path, MEMORY)
        with outage(pg_server):
            with pytest.raises(StoreDown):
                home.read(path)  # the first statement finds it down (one probe)
            started = time.monotonic()
            with pytest.raises(home.errors):
                home.read(path)
            assert time.monotonic() - started < POOL_WAIT_SECONDS  # then at once: no wait for a pooled connection
    finally:
        home.close()
