"""The dashboard's request view walks one request in the troubleshooting order."""

from __future__ import annotations

import re

from playwright.sync_api import expect


def test_the_request_view_walks_the_steps_in_order_and_marks_the_first_wrong_one(
    page, coordinator, http, start_agent, screenshot
):
    start_agent("pay-01", ["pay.charge"], status=500)
    answer = http.post(
        "/v1/invoke",
        json={"capability": "pay.charge", "request_id": "ui-why-1", "suspend": False},
    )
    assert answer.status_code == 502, answer.text  # the agent's 500: it may have acted
    trace_id = answer.json()["error"]["trace_id"]

    page.goto(f"{coordinator}/ui/#/trace/{trace_id}")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    page.locator("#trace-request").click()

    steps = page.locator("#why-steps .why-step")
    expect(steps).to_have_count(4)
    assert [steps.nth(i).get_attribute("data-step") for i in range(4)] == [
        "routing",
        "registry",
        "context",
        "delivery",
    ]
    wrong = page.locator("#why-steps .why-step.first-wrong")
    expect(wrong).to_have_attribute("data-step", "delivery")
    expect(page.locator("#why-verdict")).to_contain_text("first wrong step: delivery")
    expect(page.locator("#why-attempts")).to_contain_text("pay-01")
    expect(steps.nth(0).locator("table.candidates")).to_contain_text("pay-01")
    screenshot("request-why")
