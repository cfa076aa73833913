"""Records through the API: list, read with history, edit, delete; what the API says is what the runtime holds."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from thoth_serve.testing import client_of


def needs_identity_records(runtime) -> None:
    if "identity" not in runtime.pm.implementers("memory_records"):
        pytest.skip("the identity layer does not answer memory_records here")


async def test_a_fact_is_listed_read_edited_with_history_and_deleted(runtime, api):
    needs_identity_records(runtime)
    await api.post("/v1/peers/ada/memories", json={"text": "I live in Oslo"})
    facts = (await api.get("/v1/peers/ada/facts")).json()["records"]
    assert len(facts) == 1 and "Oslo" in facts[0]["text"] and facts[0]["plugin"] == "identity"
    first = facts[0]["id"]
    assert (await api.get(f"/v1/peers/ada/records/{first}")).json()["id"] == first
    assert (await api.get(f"/v1/peers/bob/records/{first}")).status_code == 404  # never another peer's
    edited = await api.patch(f"/v1/peers/ada/facts/{first}", json={"text": "I live in Porto"})
    assert edited.status_code == 200 and "Porto" in edited.json()["text"], edited.text
    now = edited.json()["id"]
    read = (await api.get(f"/v1/peers/ada/records/{now}")).json()
    assert any("Oslo" in old["text"] for old in read["history"])
    assert (await api.patch(f"/v1/peers/ada/facts/{now}", json={"text": ""})).status_code == 422
    assert (await api.delete(f"/v1/peers/bob/records/{now}")).status_code == 404
    assert (await api.delete(f"/v1/peers/ada/records/{now}")).json() == {"id": now, "deleted": True}
    assert (await api.get(f"/v1/peers/ada/records/{now}")).status_code == 404
    assert (await api.get("/v1/peers/ada/facts")).json()["records"] == []


async def test_records_narrow_by_layer_and_kind_and_page_with_before(runtime, api):
    needs_identity_records(runtime)
    for city in ("Oslo", "Bergen"):
        await api.post("/v1/peers/ada/memories", json={"text": f"note: visited {city}"})
    everything = (await api.get("/v1/peers/ada/records", params={"layer": "identity"})).json()["records"]
    assert everything and all(record["layer"] == "identity" for record in everything)
    one = (await api.get("/v1/peers/ada/records", params={"layer": "identity", "limit": 1})).json()["records"]
    assert len(one) == 1 and one[0]["id"] == everything[0]["id"]
    older = await api.get("/v1/peers/ada/records", params={"layer": "identity", "before": one[0]["at"]})
    assert all(record["at"] < one[0]["at"] for record in older.json()["records"])
    assert (await api.get("/v1/peers/ada/records", params={"limit": 0})).status_code == 422


FACTS = ["I live in Oslo", "my name is Ada", "I work at Acme", "my sister Ann lives in Rome", "I prefer short answers"]
Step = st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(FACTS)), st.tuples(st.just("delete"), st.integers(0, 9))
)


class Peers:
    """A fresh peer name for each Hypothesis example (they share one runtime)."""

    n = 0

    @classmethod
    def next(cls) -> str:
        cls.n += 1
        return f"p{cls.n}"


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(Step, min_size=1, max_size=6))
def test_any_sequence_of_remember_and_delete_leaves_the_api_saying_what_the_runtime_holds(runtime, steps):
    needs_identity_records(runtime)
    peer = Peers.next()

    async def run() -> None:
        async with client_of(runtime) as api:
            deleted: set[str] = set()
            for action, value in steps:
                listed = (await api.get(f"/v1/peers/{peer}/records", params={"layer": "identity"})).json()["records"]
                if action == "remember":
                    assert (await api.post(f"/v1/peers/{peer}/memories", json={"text": value})).status_code == 200
                elif listed:
                    target = listed[value % len(listed)]
                    answer = await api.delete(f"/v1/peers/{peer}/records/{target['id']}")
                    if target.get("editable") is False:  # read-only (an observation): refused, kept
                        assert answer.status_code == 404
                    else:
                        assert answer.status_code == 200
                        deleted.add(target["id"])
                through_api = (await api.get(f"/v1/peers/{peer}/records", params={"layer": "identity"})).json()
                held = await runtime.records(peer=peer, layer="identity")
                assert [r["id"] for r in through_api["records"]] == [r["id"] for r in held]
                assert not deleted & {r["id"] for r in held}
            for record in held:  # each listed record reads back as itself
                read = (await api.get(f"/v1/peers/{peer}/records/{record['id']}")).json()
                assert (read["id"], read["text"]) == (record["id"], record["text"])
            for gone in deleted:
                assert (await api.get(f"/v1/peers/{peer}/records/{gone}")).status_code == 404

    asyncio.run(run())


async def test_a_turns_episode_is_listed_searched_and_deleted(runtime, api):
    if "episodic" not in runtime.pm.implementers("memory_records"):
        pytest.skip("the episodic layer does not answer memory_records here")
    answered = await api.post(
        "/v1/peers/ada/turns", json={"text": "I planted tulips in the garden"}, headers={"Accept": "application/json"}
    )
    assert answered.status_code == 200
    await runtime.drain()
    episodes = (await api.get("/v1/peers/ada/episodes")).json()["records"]
    assert len(episodes) == 1 and "tulips" in episodes[0]["text"] and episodes[0]["kind"] == "episode"
    assert (await api.get("/v1/peers/bob/episodes")).json()["records"] == []
    found = (await api.get("/v1/peers/ada/episodes/search", params={"q": "tulips garden"})).json()
    assert found["hits"] and all(hit["layer"] == "episodic" and hit["why"] for hit in found["hits"])
    assert (await api.delete(f"/v1/peers/ada/episodes/{episodes[0]['id']}")).json()["deleted"] is True
    assert (await api.get("/v1/peers/ada/episodes")).json()["records"] == []


async def test_a_turn_sent_again_with_its_turn_id_is_kept_once(runtime, api):
    if "episodic" not in runtime.pm.implementers("memory_records"):
        pytest.skip("the episodic layer does not answer memory_records here")
    sent = {"text": "I repaired the bicycle", "turn_id": "client-7:1"}
    for _ in range(2):
        answer = await api.post("/v1/peers/ada/turns", json=sent, headers={"Accept": "application/json"})
        assert answer.status_code == 200 and answer.json()["turn_id"] == "client-7:1"
    await runtime.drain()
    episodes = (await api.get("/v1/peers/ada/episodes")).json()["records"]
    assert len(episodes) == 1 and "bicycle" in episodes[0]["text"]
    bad = await api.post("/v1/peers/ada/turns", json={"text": "x", "turn_id": "has space"})
    assert bad.status_code == 422 and bad.json()["error"].startswith("turn_id: String should match pattern")
