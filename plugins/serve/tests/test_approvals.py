"""Approvals through the API follow the one policy every frontend uses: the shared table of cases, over HTTP."""

from __future__ import annotations

import pytest
from thoth_serve.testing import client_of

from thoth_core.testing.approvals import CASES, AdminPlugin, Case, QueuePlugin, item_id, thoth_table


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
async def test_the_approvals_table(thoth_env, make_runtime, case: Case) -> None:
    queue = QueuePlugin()
    runtime = make_runtime({"queue": queue, "admins": AdminPlugin()}, config={"thoth": thoth_table(case)})
    target = item_id(case.about)
    async with client_of(runtime) as api:
        if case.action == "list":
            listed = await api.get("/v1/approvals", params={"peer": case.actor})
            assert listed.status_code == 200
            assert (target in {item["id"] for item in listed.json()["items"]}) is case.allowed
            return
        decision = "approve" if case.action in ("approve", "edit") else "reject"
        body = {"decision": decision, "peer": case.actor, "reason": "checked"}
        if case.action == "edit":
            body["text"] = "edited text"
        answer = await api.post(f"/v1/approvals/{target}", json=body)
    if case.allowed:
        assert answer.status_code == 200, answer.text
        assert queue.decided == [(target, decision, case.actor)]
    else:
        assert answer.status_code == 403, answer.text
        assert case.refusal in answer.json()["error"] and "\n" not in answer.json()["error"]
        assert queue.decided == []  # a refused decision never reaches the plugin
