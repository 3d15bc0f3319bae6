"""The dashboard's workflow runs in headless Chromium: the list, and a run drawn as a graph."""

from __future__ import annotations

import re

from playwright.sync_api import expect

MARKUP = "<img src=x onerror=alert(1)>"


def test_a_run_is_listed_and_drawn_as_a_graph_of_its_steps(
    page, coordinator, http, start_agent, screenshot
):
    start_agent("order-1", ["order.query"], answer={"status": "shipped"}, delay_s=0.05)
    start_agent("kb-1", ["kb.article.query"], answer={"articles": 3})
    start_agent("reply-1", ["reply.write"], answer={"text": "ok"})
    start_agent("broken-1", ["crm.query"], status=503)
    answer = http.post(
        "/v1/workflows/run",
        json={
            "intent": MARKUP,
            "steps": [
                {"id": "order", "action": "order.query"},
                {"id": "kb", "action": "kb.article.query"},
                {"id": "crm", "action": "crm.query", "optional": True},
                {"id": "reply", "action": "reply.write", "depends_on": ["order", "kb"]},
            ],
        },
    ).json()
    assert answer["status"] == "partial", answer

    page.goto(f"{coordinator}/ui/#/runs")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    row = page.locator(f'#runs tr[data-run="{answer["run_id"]}"]')
    expect(row).to_contain_text(MARKUP)  # shown as text, never run as markup
    expect(row).to_contain_text("partial")
    expect(row).to_contain_text("3/4")
    row.locator("a").click()

    graph = page.locator("svg#run-graph")
    expect(graph).to_be_visible()
    expect(graph.locator("g.node")).to_have_count(4)
    expect(graph.locator('g.node[data-step="reply"]')).to_have_class(re.compile(r"\bok\b"))
    expect(graph.locator('g.node[data-step="crm"]')).to_have_class(re.compile(r"\bfailed\b"))
    expect(graph.locator('g.node[data-step="order"] .node-cap')).to_have_text(
        "order.query → order-1"
    )
    expect(graph.locator('g.node[data-step="order"] .node-time')).to_contain_text(" ms")
    edges = graph.locator("path.edge")
    expect(edges).to_have_count(2)
    assert sorted(
        (e.get_attribute("data-from"), e.get_attribute("data-to")) for e in edges.all()
    ) == [("kb", "reply"), ("order", "reply")]
    # reply sits right of the steps it depends on: the graph is laid out by dependency
    x_of = {
        step: graph.locator(f'g.node[data-step="{step}"]').bounding_box()["x"]
        for step in ("order", "kb", "reply")
    }
    assert x_of["order"] == x_of["kb"] < x_of["reply"]
    expect(page.locator("#run-summary")).to_contain_text("partial")
    expect(page.locator("img")).to_have_count(0)
    screenshot("workflow-run")
