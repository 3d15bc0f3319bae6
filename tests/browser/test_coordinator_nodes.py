"""Which coordinator served what: two coordinators on one Redis, each with its dashboard.

A request answered by coordinator A shows `coord-a` in A's trace list, trace view and
decisions; B's request view walks it too (the why records are shared) and says A
answered it, while B's own connection line says B.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import ExitStack

import httpx
import pytest
from playwright.sync_api import Page, expect

from agent_reach.config import Settings
from agent_reach.testing.fake_agent import FakeAgent
from agent_reach.testing.servers import ServerThread, run_coordinator


@pytest.fixture
def nodes(redis_url: str, redis_prefix: str) -> Iterator[dict[str, str]]:
    """Node id -> URL of two coordinators sharing one Redis, and an echo agent."""
    shared = Settings(
        decision_log="off", registry_backend="redis", redis_url=redis_url, redis_prefix=redis_prefix
    )
    with ExitStack() as stack:
        urls = {}
        for node in ("coord-a", "coord-b"):
            url, _ = stack.enter_context(
                run_coordinator(shared.model_copy(update={"node_id": node}))
            )
            urls[node] = url
        agent = stack.enter_context(ServerThread(FakeAgent(name="echo-01")))
        registration = {
            "id": "echo-01",
            "capabilities": ["echo"],
            "transport": {"endpoint": f"{agent.url}/invoke"},
        }
        assert httpx.post(f"{urls['coord-a']}/v1/agents", json=registration).status_code == 201
        yield urls


def live(page: Page, url: str, node: str) -> None:
    page.goto(url)
    expect(page.locator("#connection")).to_have_class(re.compile(r"\blive\b"))
    expect(page.locator("#connection")).to_contain_text(f"node {node}")


@pytest.mark.redis
def test_every_view_names_the_coordinator_that_served_the_request(page, nodes, screenshot):
    a, b = nodes["coord-a"], nodes["coord-b"]
    answer = httpx.post(f"{a}/v1/invoke", json={"capability": "echo", "request_id": "ui-node-1"})
    assert answer.status_code == 200, answer.text
    trace_id = answer.json()["trace_id"]

    live(page, f"{a}/ui/#/traces", "coord-a")
    row = page.locator("#traces tbody tr").filter(has_text=trace_id[:12])
    expect(row.locator("td.node")).to_have_text("coord-a")
    expect(page.locator("#stored")).to_contain_text("node coord-a")

    live(page, f"{a}/ui/#/trace/{trace_id}", "coord-a")
    expect(page.locator("#trace-node")).to_have_text("served by coordinator coord-a")
    expect(page.locator("#trace-decisions .decision .node").first).to_have_text("node coord-a")

    live(page, f"{a}/ui/#/decisions", "coord-a")
    expect(page.locator("#decisions-node")).to_contain_text("on coordinator coord-a")
    expect(page.locator("#decisions .decision .node").first).to_have_text("node coord-a")

    # B never saw the request, yet walks it from the shared records and says who answered
    live(page, f"{b}/ui/#/request/ui-node-1", "coord-b")
    expect(page.locator("#why-node")).to_have_text("answered by coordinator coord-a")
    expect(page.locator("#why-steps .why-step")).to_have_count(4)
    expect(page.locator("#why-attempts")).to_contain_text("echo-01")
    screenshot("request-why-other-node")
    live(page, f"{b}/ui/#/decisions", "coord-b")
    expect(page.locator("#decisions-node")).to_contain_text("on coordinator coord-b")
    expect(page.locator("#decisions .decision")).to_have_count(0)
