"""Every view of the dashboard with data in it: one header per column in every table, an
agent's card and declared semantics, the text a request was routed by."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agent_reach.testing.waiting import wait_until

TEXT = "帮我查一下订单 888 的状态"
SKILLS = [
    {
        "capability": "order.query",
        "description": "查询订单状态",
        "examples": ["查订单 123 的状态", "我的订单到哪一步了"],
        "idempotent": True,
    },
]
# In every table: with a header row, each body row has as many cells (colspans counted) as
# it has headers; without one, each row opens with its own header cell (a key-value table).
COUNT_TABLES = """() => {
  const problems = [];
  let checked = 0;
  for (const table of document.querySelectorAll("main table")) {
    if (table.closest("[hidden]")) continue;
    checked += 1;
    const width = (row) => [...row.cells].reduce((n, cell) => n + cell.colSpan, 0);
    const label = table.id || table.className || "table";
    const head = table.tHead?.rows[0];
    const rows = [...table.tBodies].flatMap((body) => [...body.rows]);
    for (const row of head ? rows : table.rows) {
      if (head && width(row) !== width(head)) {
        problems.push(`${label}: ${width(row)} cells, ${width(head)} headers: ${row.innerText}`);
      } else if (!head && row.cells[0]?.tagName !== "TH") {
        problems.push(`${label}: a row without its header: ${row.innerText}`);
      }
    }
  }
  return { problems, checked };
}"""


def _open(page: Page, coordinator: str, view: str, ready: str) -> None:
    page.goto(f"{coordinator}/ui/#/{view}")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator(ready).first).to_be_visible()


def _tables(page: Page) -> dict[str, Any]:
    for details in page.locator("main details").all():  # closed ones hide their tables
        details.evaluate("d => { d.open = true; }")
    counted: dict[str, Any] = page.evaluate(COUNT_TABLES)
    return counted


@pytest.fixture
def traffic(http, start_agent) -> dict[str, str]:
    """Agents, a text request, a delegated-free workflow run, a suspended request and a
    dead letter: something in every view."""
    start_agent(
        "orders-1",
        ["order.query"],
        display_name="订单助手",
        description="订单查询、物流进度",
        examples=["订单怎么还没到"],
        skills=SKILLS,
        idempotent=True,
    )
    start_agent("parcel-1", ["parcel.track"], examples=["我的快递到哪了", "包裹怎么还没到"])
    start_agent("down-1", ["crm.query"], status=503, healthy=False)
    wait_until(lambda: http.get("/v1/policy").json()["matching"]["current"], "matchers fitted")
    routed = http.post("/v1/invoke", json={"text": TEXT, "request_id": "ui-text-1"})
    assert routed.status_code == 200, routed.text
    assert routed.json()["agent_id"] == "orders-1"
    run = http.post(
        "/v1/workflows/run",
        json={"intent": "check", "steps": [{"id": "order", "action": "order.query"}]},
    ).json()
    assert http.post("/v1/invoke", json={"capability": "crm.query"}).status_code == 202
    refused = http.post("/v1/invoke", json={"capability": "order.query", "max_hop": 0})
    assert refused.json()["error"]["code"] == "hop_limit"
    return {"trace": routed.json()["trace_id"], "run": run["run_id"]}


def test_every_table_of_every_view_has_one_header_per_column(
    page: Page, coordinator: str, traffic: dict[str, str]
) -> None:
    views = {
        "registry": '#registry tr[data-agent="orders-1"]',
        "traffic": ".chart canvas",
        "decisions": "#decisions details.decision",
        "traces": "#traces tbody tr",
        f"trace/{traffic['trace']}": "#trace-decisions .candidates",
        "agent/orders-1": "#agent-skills tbody tr",
        "queues": "#deadletters tbody tr",
        "policy": "#policy-head",
        "request/ui-text-1": "#why-steps .why-step",
        "runs": "#runs tbody tr",
        f"run/{traffic['run']}": "svg#run-graph",
    }
    problems: dict[str, list[str]] = {}
    checked = 0
    for view, ready in views.items():
        _open(page, coordinator, view, ready)
        counted = _tables(page)
        checked += counted["checked"]
        if counted["problems"]:
            problems[view] = counted["problems"]
    assert problems == {}
    assert checked >= 15, "fewer tables than the views hold: did a view draw nothing?"


def test_the_agent_view_shows_its_card_and_declared_semantics(
    page: Page, coordinator: str, traffic: dict[str, str], screenshot
) -> None:
    _open(page, coordinator, "agent/orders-1", "#agent-skills tbody tr")

    card = page.locator("#agent-card")
    expect(card).to_contain_text("订单查询、物流进度")
    expect(card).to_contain_text("订单怎么还没到")
    skill = page.locator("#agent-skills tbody tr")
    expect(skill).to_contain_text("order.query")
    expect(skill).to_contain_text("查询订单状态")
    expect(skill).to_contain_text("我的订单到哪一步了")
    expect(skill).to_contain_text("idempotent: yes")
    expect(page.locator("#agent-details")).to_contain_text("idempotentyes: re-sent")
    screenshot("agent-card")


def test_the_routed_text_is_shown_in_the_request_decision_and_trace_views(
    page: Page, coordinator: str, traffic: dict[str, str], screenshot
) -> None:
    _open(page, coordinator, "request/ui-text-1", "#why-steps .why-step")
    expect(page.locator("#why-text")).to_contain_text(TEXT)
    screenshot("request-text")

    _open(page, coordinator, "decisions", "#decisions details.decision")
    decision = page.locator("#decisions details.decision", has_text=TEXT)
    expect(decision).to_have_count(1)  # the one routed by text; the others named a capability
    expect(decision.locator("summary")).to_contain_text(TEXT)
    decision.locator("summary").click()
    expect(decision.locator(".routed-text")).to_contain_text(TEXT)

    _open(page, coordinator, f"trace/{traffic['trace']}", "#timeline .span-route")
    expect(page.locator("#timeline .span-route")).to_contain_text(TEXT)
    screenshot("trace-text")


def test_a_request_routed_by_capability_shows_no_text(page: Page, coordinator: str, http) -> None:
    http.post(
        "/v1/agents",
        json={
            "id": "echo-1",
            "capabilities": ["echo"],
            "transport": {"endpoint": "http://127.0.0.1:9/invoke"},
        },
    )
    http.post("/v1/invoke", json={"capability": "echo", "request_id": "ui-cap-1"})

    _open(page, coordinator, "request/ui-cap-1", "#why-steps .why-step")
    expect(page.locator("#why-text")).to_be_hidden()
