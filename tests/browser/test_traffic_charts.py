"""The Traffic view's charts in headless Chromium: real requests through a real coordinator
and real agents, then the values each chart drew are read back and compared with them."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import httpx
from playwright.sync_api import Page, expect

# Requests sent per capability, and how each agent answers.
ORDERS, STOCK, REFUNDS, UNKNOWN = 12, 6, 4, 3
ORDER_DELAY_MS, STOCK_DELAY_MS = 80, 20
TEXTS = ["我买的东西怎么还没到", "查一下库存", "退款怎么申请", "今天天气怎么样", "订单 123 到哪了"]
BUCKET_S = 5  # the series' bucket (observability/timeseries.py)
BINS = 20  # the routing histograms' bins over [0, 1]
DRAWN_S = 20  # a bucket is drawn once complete: well within this after the last request

# The series each chart drew, by legend label: [(x, y), ...] without the empty points.
READ_CHART = """(name) => {
  const u = window.dashboardCharts?.[name];
  if (!u) return null;
  const out = {};
  u.series.slice(1).forEach((s, i) => {
    out[s.label] = u.data[0].map((x, k) => [x, u.data[i + 1][k]])
      .filter(([, y]) => y !== null && y !== 0);
  });
  return { series: out, threshold: u.threshold ?? null };
}"""


def read_chart(page: Page, name: str) -> dict[str, Any]:
    return page.evaluate(READ_CHART, name)


def counted(page: Page, chart: str, label: str) -> int:
    """How many events a per-second chart's series stands for (rate x bucket, summed)."""
    drawn = read_chart(page, chart)
    points = (drawn or {"series": {}})["series"].get(label, [])
    return round(sum(y for _, y in points) * BUCKET_S)


def wait_for_count(page: Page, chart: str, label: str, expected: int) -> None:
    page.wait_for_function(
        """([name, label, expected, bucket]) => {
          const u = window.dashboardCharts?.[name];
          const i = u ? u.series.findIndex((s) => s.label === label) : -1;
          if (i < 1) return false;
          return Math.round(u.data[i].reduce((a, b) => a + (b ?? 0), 0) * bucket) === expected;
        }""",
        arg=[chart, label, expected, BUCKET_S],
        timeout=DRAWN_S * 1000,
    )


def send_traffic(http: httpx.Client) -> None:
    for _ in range(ORDERS):
        assert http.post("/v1/invoke", json={"capability": "order.status"}).status_code == 200
    for _ in range(STOCK):
        assert http.post("/v1/invoke", json={"capability": "inventory.check"}).status_code == 200
    for _ in range(REFUNDS):
        assert http.post("/v1/invoke", json={"capability": "refund.apply"}).status_code == 502
    for _ in range(UNKNOWN):
        answer = http.post("/v1/invoke", json={"capability": "no.such.capability"})
        assert answer.json()["error"]["code"] == "no_capability"
    for text in TEXTS:
        assert http.post("/v1/route", json={"text": text}).status_code == 200


def test_the_charts_draw_the_requests_that_were_sent(
    page, coordinator, http, start_agent, screenshot
):
    start_agent(
        "order-01",
        ["order.status"],
        display_name="订单查询",
        delay_s=ORDER_DELAY_MS / 1000,
        description="订单状态 物流 到哪了",
        examples=["我的订单到哪了", "订单状态"],
    )
    start_agent(
        "stock-01",
        ["inventory.check"],
        display_name="库存查询",
        delay_s=STOCK_DELAY_MS / 1000,
        description="库存 查询",
        examples=["还有货吗", "查一下库存"],
    )
    start_agent(
        "refund-01",
        ["refund.apply"],
        display_name="退款助手",
        status=400,
        description="退款 申请",
        examples=["我要退款", "退款怎么申请"],
    )
    send_traffic(http)

    page.goto(f"{coordinator}/ui/#/traffic")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator('#nav a[data-view="traffic"]')).to_have_class(re.compile(r"\bactive\b"))
    sent = ORDERS + STOCK + REFUNDS + UNKNOWN
    expect(page.locator("#traffic-tiles")).to_contain_text(f"{sent}requests")

    wait_for_count(page, "requests", "order.status", ORDERS)
    wait_for_count(page, "requests", "(unknown)", UNKNOWN)
    assert counted(page, "requests", "inventory.check") == STOCK
    assert counted(page, "requests", "refund.apply") == REFUNDS
    assert counted(page, "errors", "refund.apply") == REFUNDS
    assert counted(page, "errors", "order.status") == 0
    assert counted(page, "refusals", "(unknown)") == UNKNOWN
    assert counted(page, "refusals", "order.status") == 0
    latency = read_chart(page, "latency")["series"]
    for label, delay_ms in (("order.status", ORDER_DELAY_MS), ("inventory.check", STOCK_DELAY_MS)):
        for kind in ("p50", "p99"):
            drawn = [y for _, y in latency[f"{label} {kind}"]]
            assert drawn, (label, kind)
            # at least what the agent waited (bins are within 2 %), and not seconds more
            assert all(0.98 * delay_ms <= y < delay_ms + 1500 for y in drawn), (label, drawn)
    assert "(unknown) p50" not in latency or latency["(unknown) p50"] == []  # refusals: no latency

    policy = http.get("/v1/policy").json()["policy"]
    confidence = read_chart(page, "confidence")
    assert sum(y for _, y in confidence["series"]["decisions"]) == len(TEXTS)
    assert confidence["threshold"]["value"] == policy["min_confidence"]
    margin = read_chart(page, "margin")
    assert margin["threshold"]["value"] == policy["margin"]
    # each text decision's measured margin (when two capabilities matched) in its bin
    decisions = http.get("/v1/decisions", params={"limit": 100}).json()["decisions"]
    measured = [d["decision"]["margin"] for d in decisions if d["kind"] == "route"]
    expected = Counter(min(BINS - 1, int(m * BINS)) for m in measured if m is not None)
    drawn = {int(x * BINS): y for x, y in margin["series"]["decisions"]}
    assert drawn == expected
    screenshot("traffic")

    page.locator('.switch a[data-by="instance"]').click()
    expect(page).to_have_url(re.compile(r"#/traffic\?by=instance$"))
    wait_for_count(page, "requests", "order-01 · 订单查询", ORDERS)
    assert counted(page, "errors", "refund-01 · 退款助手") == REFUNDS
    assert counted(page, "requests", "stock-01 · 库存查询") == STOCK
    screenshot("traffic-by-instance")
