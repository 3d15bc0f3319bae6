"""The dashboard's request view shows a delegation chain: on whose behalf, through whom,
and the calls handed on under a request with how each answered."""

from __future__ import annotations

import re
from typing import Any

import httpx
from playwright.sync_api import expect

from agent_reach import Agent, AgentRequest
from agent_reach.testing.servers import ServerThread
from agent_reach.testing.waiting import wait_until

RULE = {"principals": ["domain:ui-mesh"], "capabilities": ["work.*"]}


def test_the_request_view_shows_the_chain_and_what_each_hop_answered(
    page, coordinator, http: httpx.Client, start_agent, screenshot
):
    policy = http.get("/v1/policy").json()["policy"]
    policy.setdefault("access", {})["delegate"] = [RULE]
    assert http.put("/v1/policy", json=policy).status_code == 200
    start_agent("worker-01", ["work.do"])
    front = Agent("front-01", ["front.ask"], coordinator_url=coordinator, domain="ui-mesh")

    @front.handler
    async def ask(request: AgentRequest) -> dict[str, Any]:
        handed = await request.delegate("work.do", payload={})
        return {"handed": handed.request_id}

    server = ServerThread(front.app)
    front.endpoint_url = f"{server.url}/invoke"
    server.start()
    try:
        wait_until(
            lambda: http.get("/v1/agents/front-01").json().get("status") == "healthy",
            "front-01's first probe",
        )
        answer = http.post(
            "/v1/invoke", json={"capability": "front.ask", "request_id": "ui-chain-1"}
        )
        assert answer.status_code == 200, answer.text
        handed = answer.json()["result"]["handed"]

        page.goto(f"{coordinator}/ui/#/request/ui-chain-1")
        expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
        rows = page.locator("#why-handed-on tbody tr")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("anonymous → front-01")
        expect(rows.first).to_contain_text("work.do")
        expect(rows.first).to_contain_text("worker-01 ok")
        screenshot("request-chain")

        rows.first.get_by_role("link", name=handed).click()
        expect(page.locator("#why-delegation")).to_contain_text(
            "anonymous · anonymous → front-01 (front-01)"
        )
        expect(page.locator("#why-attempts")).to_contain_text("worker-01")
        page.goto(f"{coordinator}/ui/#/trace/{answer.json()['trace_id']}")
        expect(page.locator(".span-chain")).to_have_text("on behalf of anonymous via front-01")
    finally:
        server.stop()
