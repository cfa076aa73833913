"""The runtime's record calls with fake plugins: merged newest first, `plugin` filled in, a failing or wrong plugin
logged and skipped, layer and kind filters, text refused before any plugin is asked."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from thoth_core import hookimpl
from thoth_core.errors import InputError


def rec(layer: str, kind: str, id: str, at: float, **more: Any) -> dict[str, Any]:  # noqa: A002 - the record's key
    return {"layer": layer, "kind": kind, "id": id, "text": f"text of {id}", "at": at, **more}


class Notes:
    """A layer holding notes for ann only; edits and deletes them."""

    LAYER = "notes"

    def __init__(self) -> None:
        self.held = {"n1": rec("notes", "note", "n1", 10.0), "n2": rec("notes", "note", "n2", 30.0)}
        self.asked: list[str] = []

    @hookimpl
    def memory_records(self, peer, kind, limit, before):
        if peer != "ann":
            return None
        found = [r for r in self.held.values() if kind in (None, r["kind"]) and (before is None or r["at"] < before)]
        return sorted(found, key=lambda r: -r["at"])[:limit]

    @hookimpl
    def memory_record(self, record_id, peer):
        self.asked.append(record_id)
        return self.held.get(record_id) if peer == "ann" else None

    @hookimpl
    def edit_memory_record(self, record_id, text, peer):
        if peer != "ann" or record_id not in self.held:
            return None
        self.held[record_id] = dict(self.held[record_id], text=text)
        return self.held[record_id]

    @hookimpl
    def delete_memory_record(self, record_id, peer):
        return True if peer == "ann" and self.held.pop(record_id, None) else None


class Episodes:
    """Another layer, async, with one episode."""

    LAYER = "episodes"

    @hookimpl
    async def memory_records(self, peer, limit):
        return [rec("episodes", "episode", "ep1", 20.0)][:limit] if peer == "ann" else []


class Broken:
    """Raises on every record hook."""

    @hookimpl
    def memory_records(self):
        raise RuntimeError("store gone")

    @hookimpl
    def memory_record(self):
        raise RuntimeError("store gone")

    @hookimpl
    def delete_memory_record(self):
        raise RuntimeError("store gone")


class Wrong:
    """Answers with things that are not records."""

    @hookimpl
    def memory_records(self):
        return [{"id": "no layer"}, rec("wrong", "x", "w1", 5.0)]

    @hookimpl
    def memory_record(self):
        return "w1"


@pytest.fixture
def runtime(make_runtime):
    return make_runtime({"notes": Notes(), "episodes": Episodes(), "broken": Broken(), "wrong": Wrong()})


async def test_records_are_merged_newest_first_with_their_plugin_and_failures_are_left_out(runtime, caplog):
    with caplog.at_level(logging.ERROR):
        records = await runtime.records(peer="ann")
    assert [(r["id"], r["plugin"]) for r in records] == [
        ("n2", "notes"),
        ("ep1", "episodes"),
        ("n1", "notes"),
        ("w1", "wrong"),  # the good item of a list that held a bad one
    ]
    assert "plugin broken: memory_records failed: RuntimeError: store gone" in caplog.text
    assert "plugin wrong: memory_records returned a list holding dict" in caplog.text
    assert [r["id"] for r in await runtime.records(peer="ann", limit=2)] == ["n2", "ep1"]
    assert [r["id"] for r in await runtime.records(peer="ann", before=20.0)] == ["n1", "w1"]
    assert [r["id"] for r in await runtime.records(peer="ann", layer="notes")] == ["n2", "n1"]
    assert [r["id"] for r in await runtime.records(peer="ann", layer="episodes", kind="episode")] == ["ep1"]
    assert await runtime.records(peer="ann", layer="nothing") == []
    assert [r["id"] for r in await runtime.records(peer="bob")] == ["w1"]


async def test_one_record_comes_from_its_owner_past_a_failing_or_wrong_plugin(runtime):
    found = await runtime.get_record(record_id="n1", peer="ann")
    assert found is not None and (found["id"], found["plugin"]) == ("n1", "notes")
    assert await runtime.get_record(record_id="n1", peer="bob") is None
    assert await runtime.get_record(record_id="", peer="ann") is None
    edited = await runtime.edit_record(record_id="n1", text="  new words ", peer="ann")
    assert edited is not None and edited["text"] == "new words" and edited["plugin"] == "notes"
    assert await runtime.edit_record(record_id="n1", text="new words", peer="bob") is None
    assert await runtime.delete_record(record_id="n1", peer="bob") is False
    assert await runtime.delete_record(record_id="n1", peer="ann") is True
    assert await runtime.delete_record(record_id="n1", peer="ann") is False


@pytest.mark.parametrize(
    ("text", "says"),
    [("", "empty"), ("   ", "empty"), ("a\x00b", "NUL"), ("key ghp_" + "a1B2c3D4e5" * 4, "secret")],
)
async def test_text_no_store_may_keep_is_refused_before_any_plugin_is_asked(make_runtime, text, says):
    notes = Notes()
    runtime = make_runtime({"notes": notes})
    with pytest.raises(InputError, match=says):
        await runtime.edit_record(record_id="n1", text=text, peer="ann")
    assert notes.held["n1"]["text"] == "text of n1"


async def test_bad_names_and_limits_are_one_line_errors(runtime):
    with pytest.raises(InputError, match="peer name"):
        await runtime.records(peer="")
    with pytest.raises(InputError, match="workspace name"):
        await runtime.get_record(record_id="n1", peer="ann", workspace="a\nb")
    for limit in (0, -1, True, 2.5):
        with pytest.raises(InputError, match="limit"):
            await runtime.records(peer="ann", limit=limit)
