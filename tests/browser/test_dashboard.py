"""The `/ui` dashboard in headless Chromium, against a real coordinator and real agents."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import httpx
import pytest
from playwright.sync_api import Page, expect

from agent_reach.testing.waiting import wait_until

MARKUP = "<img src=x onerror=alert(1)>"
MAX_LOAD_REQUESTS = 20_000  # the load thread stops by itself, whatever happens to the test
SETTLE_MS = 10_000  # generous deadline for health changes driven by probes and load


def open_view(page: Page, coordinator: str, view: str) -> None:
    """Open `#/view` and wait until its first poll has drawn it."""
    page.goto(f"{coordinator}/ui/#/{view}")
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))


@pytest.fixture
def load(coordinator: str) -> Iterator[threading.Event]:
    """Keep invoking `echo` in the background until the test ends."""
    stop = threading.Event()

    def run() -> None:
        with httpx.Client(base_url=coordinator, timeout=10) as http:
            for _ in range(MAX_LOAD_REQUESTS):
                if stop.is_set():
                    return
                http.post("/v1/invoke", json={"capability": "echo", "payload": {"q": "订单"}})

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield stop
    stop.set()
    thread.join()


def test_the_registry_shows_a_newly_registered_agent_at_its_next_refresh(
    page, coordinator, start_agent, screenshot
):
    start_agent("kb-01", ["kb.search"], display_name="知识库助手")
    open_view(page, coordinator, "registry")
    expect(page.locator('#registry tr[data-agent="kb-01"]')).to_be_visible()
    polls: list[str] = []  # the registry view's answers, counted instead of timed
    page.on("response", lambda r: polls.append(r.url) if r.url.endswith("/v1/agents") else None)

    start_agent("stock-01", ["inventory.check", "inventory.reserve"], display_name="库存查询")
    page.evaluate("0")  # a round trip: the answers seen so far are counted
    registered_at = len(polls)

    row = page.locator('#registry tr[data-agent="stock-01"]')
    expect(row).to_be_visible(timeout=SETTLE_MS)
    # drawn by the first poll sent after the registration (the one in flight may predate it)
    assert len(polls) - registered_at <= 2, polls
    expect(row.locator(".name")).to_have_text("库存查询")
    expect(row.locator(".status")).to_have_text("healthy")
    expect(row.locator(".quality")).to_have_text("1.00")  # no evidence against it yet
    expect(page.locator("#registry-tiles")).to_contain_text("2instances")
    screenshot("registry")


def test_an_agent_killed_under_load_turns_suspect_then_offline(
    page, coordinator, start_agent, load, screenshot
):
    start_agent("steady-1", ["echo"], display_name="稳定")
    _, victim = start_agent("victim-1", ["echo"], display_name="将被关闭", weight=2.0)
    open_view(page, coordinator, "registry")
    status = page.locator('#registry tr[data-agent="victim-1"] .status')
    expect(status).to_have_text("healthy")

    victim.stop()

    expect(status).to_have_text(re.compile("suspect|offline"), timeout=SETTLE_MS)
    expect(status).to_have_text("offline", timeout=SETTLE_MS)
    expect(page.locator('#registry tr[data-agent="steady-1"] .status')).to_have_text("healthy")
    # problems sort first, so the offline instance heads the table
    expect(page.locator("#registry tbody tr").first).to_have_attribute("data-agent", "victim-1")
    screenshot("registry-offline")


def test_a_requests_trace_shows_its_hops_and_a_retry(
    page, coordinator, http, start_agent, screenshot
):
    start_agent("slow-1", ["kb.search"], delay_s=3.0, timeout_class="quick", weight=2.0)
    start_agent("fast-1", ["kb.search"], timeout_class="quick", display_name="快速")
    answer = http.post("/v1/invoke", json={"capability": "kb.search"}).json()
    assert answer["agent_id"] == "fast-1"

    open_view(page, coordinator, "traces")
    page.locator(f'#traces a[href="#/trace/{answer["trace_id"]}"]').click()

    expect(page.locator("#trace-id")).to_have_text(answer["trace_id"])
    rows = page.locator("#timeline .rows .span-row")
    expect(rows).to_have_count(4)
    expect(rows.nth(0)).to_contain_text("invoke")
    expect(rows.nth(1)).to_contain_text("route")
    first, second = rows.nth(2), rows.nth(3)
    expect(first).to_contain_text("slow-1")
    expect(first).to_contain_text("attempt 1")
    expect(first).to_have_attribute("data-status", "agent_timeout")
    expect(second).to_contain_text("attempt 2")
    expect(second).to_contain_text("retry · next instance")
    expect(second).to_have_attribute("data-status", "ok")
    expect(page.locator("#trace-decisions .candidates tr.chosen")).to_contain_text("slow-1")
    screenshot("trace")

    second.get_by_role("link", name="fast-1").click()
    expect(page.locator("#agent-details")).to_contain_text("快速")


def test_decisions_show_candidates_and_factor_scores_and_link_to_the_trace(
    page, coordinator, http, start_agent, screenshot
):
    start_agent("a-1", ["echo"])
    start_agent("a-2", ["echo"], weight=3.0)
    answer = http.post("/v1/invoke", json={"capability": "echo"}).json()

    open_view(page, coordinator, "decisions")
    decision = page.locator("#decisions details.decision").first
    expect(decision).to_contain_text("echo")
    decision.locator("summary").click()
    table = decision.locator(".candidates")
    expect(table.locator("tbody tr")).to_have_count(2)
    expect(table.locator("thead")).to_contain_text("health")
    expect(table.locator("tr.chosen")).to_contain_text("a-2")
    screenshot("decisions")

    decision.get_by_role("link", name="trace").click()
    expect(page.locator("#trace-id")).to_have_text(answer["trace_id"])


def test_a_text_decision_explains_matchers_thresholds_and_params(
    page, coordinator, http, start_agent, screenshot
):
    schema = {"properties": {"order_no": {"type": "string", "pattern": "[0-9]{3,}"}}}
    start_agent(
        "orders-1",
        ["order.query"],
        description="订单查询",
        examples=["查订单 123 的状态", "我的订单到哪一步了", "订单状态"],
        input_schema=schema,
    )
    start_agent("parcel-1", ["parcel.track"], examples=["我的快递到哪了", "包裹怎么还没到"])
    wait_until(lambda: http.get("/v1/policy").json()["matching"]["current"], "the matchers to fit")
    http.post("/v1/route", json={"text": "帮我查一下订单 888 的状态"})

    open_view(page, coordinator, "decisions")
    decision = page.locator("#decisions details.decision").first
    decision.locator("summary").click()
    explained = decision.locator(".text-match")
    expect(explained).to_contain_text("lexical + embedding")
    expect(explained).to_contain_text("min_confidence")
    # each threshold as the decision states it: the comparison that held
    expect(explained).to_contain_text(re.compile(r"best confidence \d\.\d+ (≥|<) \d"))
    expect(explained).to_contain_text('{"order_no":"888"}')
    screenshot("text-decision")


def test_user_supplied_names_containing_markup_are_shown_escaped(
    page, coordinator, http, start_agent
):
    start_agent("xss-1", ["echo"], display_name=MARKUP, idempotent=True, safe=True)
    http.post("/v1/invoke", json={"capability": "echo"})

    open_view(page, coordinator, "registry")
    expect(page.locator('#registry tr[data-agent="xss-1"] .name')).to_have_text(MARKUP)
    open_view(page, coordinator, "agent/xss-1")
    expect(page.locator("#agent-details")).to_contain_text(MARKUP)
    expect(page.locator("#agent-details")).to_contain_text("idempotentyes: re-sent")
    expect(page.locator("#agent-details")).to_contain_text("safeyes: no side effects")
    expect(page.locator("main img")).to_have_count(0)


def test_queues_and_policy_show_what_waits_and_what_is_in_force(
    page, coordinator, http, start_agent, screenshot
):
    # its probe fails too: the suspended request waits, instead of being tried again at
    # once (and ending as no_instance) when a probe finds the instance up
    start_agent("down-1", ["echo"], status=503, healthy=False)
    assert http.post("/v1/invoke", json={"capability": "echo"}).status_code == 202
    refused = http.post("/v1/invoke", json={"capability": "echo", "max_hop": 0})
    assert refused.json()["error"]["code"] == "hop_limit"

    open_view(page, coordinator, "queues")
    expect(page.locator("#suspended tbody tr")).to_have_count(1)
    expect(page.locator("#deadletters tbody tr")).to_contain_text("hop_limit")
    screenshot("queues")

    open_view(page, coordinator, "policy")
    version = http.get("/v1/policy").json()["version"]
    expect(page.locator("#policy-head")).to_contain_text(version)
    expect(page.locator("main")).to_contain_text("quick")
    screenshot("policy")
